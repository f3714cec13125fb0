package otellock

import (
	"runtime/debug"
	"sync"
)

// ScopeName is the instrumentation scope of the tracer and meter: the
// package path.
const ScopeName = "github.com/lockkit/lockkit/otellock"

const modulePath = "github.com/lockkit/lockkit"

// Version returns the version of module github.com/lockkit/lockkit that the
// running program was built with, as the Go toolchain recorded it (such as
// "v1.2.0"), or "(devel)" when it is not known, as in a build inside the
// module itself. It is the instrumentation scope's version.
func Version() string { return version() }

var version = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if bi.Main.Path == modulePath && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, m := range bi.Deps {
		if m.Path == modulePath {
			return m.Version
		}
	}
	return "(devel)"
})
