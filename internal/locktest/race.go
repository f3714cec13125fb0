//go:build race

package locktest

// RaceEnabled reports whether the tests run under the race detector,
// which slows the code it instruments several times.
const RaceEnabled = true

// raceScale multiplies busyScale under the race detector.
const raceScale = 2
