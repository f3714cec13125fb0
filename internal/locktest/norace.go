//go:build !race

package locktest

// raceScale multiplies busyScale under the race detector; 1 without it.
const raceScale = 1
