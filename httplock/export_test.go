package httplock

import "github.com/lockkit/lockkit/internal/httpkit"

// ReleasesInFlight returns how many releases run in the background.
func ReleasesInFlight() int { return httpkit.ReleasesInFlight() }
