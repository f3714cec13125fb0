package ginlock

import "errors"

// ErrMissingValue is the error, passed to [gin.Context.Error] and to the
// failure handler, of a request that lacks a value the key template needs:
// a path parameter, query parameter, header or [WithValue] value that is
// missing or empty. Such a request is answered 400 Bad Request before any
// Redis call. The error's text names the missing value.
var ErrMissingValue = errors.New("ginlock: key value missing")

// missingError names the value a request lacks; it matches ErrMissingValue.
type missingError struct {
	what string // e.g. `query parameter "tenant"`
}

func (e *missingError) Error() string { return "ginlock: " + e.what + " is missing or empty" }

func (e *missingError) Is(target error) bool { return target == ErrMissingValue }
