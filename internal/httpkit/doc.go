// Package httpkit is what the lock middlewares for HTTP frameworks share,
// whatever the framework: key templates and the escaping of their values
// (template.go, escape.go), the checked settings of a middleware and the
// kinds of hold (settings.go, kinds.go), the hold of a request's key
// while its handler runs, with re-entry and release (middleware.go,
// wraps.go, release.go), the classification of an acquisition's errors
// and their redacted text (errors.go), and RFC 9457 problem answers with
// Retry-After (problem.go). Packages ginlock and httplock build their
// middlewares on it, so that gin and net/http render the same keys and
// give the same answers; each adds its framework's request adapter and
// options.
package httpkit
