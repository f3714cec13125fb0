package ginlock

import (
	"errors"

	"github.com/lockkit/lockkit/internal/httpkit"
)

// ErrMissingValue is the error, passed to [gin.Context.Error] and to the
// failure handler, of a request that lacks a value the key template needs:
// a path parameter, query parameter, header or [WithValue] value that is
// missing or empty. Such a request is answered 400 Bad Request before any
// Redis call. The error's text names the missing value.
var ErrMissingValue = errors.New("ginlock: key value missing")

// pkg names the package in the errors of its templates.
var pkg = httpkit.NewPkg("ginlock", ErrMissingValue)
