//go:build race

package locktest

// raceScale multiplies busyScale under the race detector, which slows
// the code it instruments several times.
const raceScale = 2
