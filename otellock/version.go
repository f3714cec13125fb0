package otellock

// ScopeName is the instrumentation scope of the tracer and meter: the
// package path.
const ScopeName = "github.com/lockkit/lockkit/otellock"

// version is the release of module github.com/lockkit/lockkit that this
// source belongs to; a release raises it in the commit it tags.
const version = "0.1.0"

// Version returns the version of module github.com/lockkit/lockkit this
// package belongs to, such as "0.1.0", whatever the build (the Go
// toolchain's build information says "(devel)" or a pseudo-version inside
// the module's own repository). It is the instrumentation scope's version.
func Version() string { return version }
