//go:build !race

package locktest

// RaceEnabled reports whether the tests run under the race detector,
// which slows the code it instruments several times.
const RaceEnabled = false

// raceScale multiplies busyScale under the race detector; 1 without it.
const raceScale = 1
