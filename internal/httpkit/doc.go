// Package httpkit is what the lock middlewares for HTTP frameworks share,
// whatever the framework: key templates and the escaping of their values,
// the classification of an acquisition's errors and their redacted text,
// RFC 9457 problem answers with Retry-After, and the release of a
// request's hold after its handler. Packages ginlock and httplock build
// their middlewares on it, so that gin and net/http render the same keys
// and give the same answers.
package httpkit
