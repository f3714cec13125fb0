// Package httplock holds distributed locks of package lock around
// net/http handlers, keyed by Go 1.22 ServeMux patterns, and replays the
// stored answer of a request retried with the same Idempotency-Key.
package httplock
