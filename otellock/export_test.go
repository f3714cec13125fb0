package otellock

// ErrorType exposes errorType to the tests.
var ErrorType = errorType
