package ginlock

// ReleasesInFlight returns how many releases run in the background.
func ReleasesInFlight() int { return int(releasing.Load()) }
