// Package readme keeps the Go code of the project's README.md compiling:
// its tests hold every Go block of the README in a function that the
// compiler checks, and fail when the two drift apart.
package readme
