module github.com/lockkit/lockkit/httplock

go 1.24.13

// The repository's go.work joins the modules; this replace does the same
// when the module is built alone (GOWORK=off).
replace github.com/lockkit/lockkit => ..

require (
	github.com/lockkit/lockkit v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
