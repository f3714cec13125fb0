module github.com/lockkit/lockkit/otellock

go 1.24.13

// The repository's go.work joins the modules; this replace does the same
// when the module is built alone (GOWORK=off).
replace github.com/lockkit/lockkit => ..

require (
	github.com/lockkit/lockkit v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	go.opentelemetry.io/otel v1.41.0
	go.opentelemetry.io/otel/metric v1.41.0
	go.opentelemetry.io/otel/trace v1.41.0
	go.uber.org/goleak v1.3.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.35.0 // indirect
)
