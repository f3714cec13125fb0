package ginlock

// ReleasesInFlight returns how many releases run in the background.
func ReleasesInFlight() int {
	releases.mu.Lock()
	defer releases.mu.Unlock()
	n := 0
	for _, k := range releases.n {
		n += k
	}
	return n
}
