package otellock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/lockkit/lockkit/lock"
)

// Types of the errors that only wrap or carry text, made by fmt.Errorf,
// errors.Join and errors.New: they say nothing about what failed.
var (
	fmtTypes = []reflect.Type{
		reflect.TypeOf(fmt.Errorf("%w", errors.ErrUnsupported)),
		reflect.TypeOf(fmt.Errorf("%w%w", errors.ErrUnsupported, errors.ErrUnsupported)),
	}
	wrapTypes = append(slices.Clip(fmtTypes), reflect.TypeOf(errors.Join(errors.ErrUnsupported)))
	textType  = reflect.TypeOf(errors.New(""))
)

// Errors whose name is their error.type.
var namedErrors = []struct {
	err  error
	name string
}{
	{lock.ErrInvalid, "lock.ErrInvalid"},
	{lock.ErrClosed, "lock.ErrClosed"},
	{lock.ErrLost, "lock.ErrLost"},
	{context.Canceled, "context.Canceled"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
}

// errorType returns the low-cardinality error.type of err: the name of a
// lockkit or context sentinel it matches; else the Go type of the first
// error in its chain that is not made by fmt.Errorf or errors.Join (of a
// join, the first error is followed), such as "*net.OpError" or
// "proto.RedisError"; "_OTHER" when that is a plain text error.
func errorType(err error) string {
	for _, n := range namedErrors {
		if errors.Is(err, n.err) {
			return n.name
		}
	}
	if t := reflect.TypeOf(unwrap(err, wrapTypes)); t != textType {
		return t.String()
	}
	return otherName
}

// description is the status description of a span that ended with err.
// The core names the key in the messages of its fmt.Errorf layers, so
// without [WithRawKey] only the message under them is used: for `lock:
// acquire "K": dial tcp ...: connection refused` the *net.OpError's.
// Messages about invalid arguments never contain the key and are kept
// whole.
func description(err error, rawKey bool) string {
	if rawKey || errors.Is(err, lock.ErrInvalid) {
		return err.Error()
	}
	return unwrap(err, fmtTypes).Error()
}

// unwrap returns the first error in err's chain whose type is not one of
// types, following the first error of an error that wraps several.
func unwrap(err error, types []reflect.Type) error {
	for slices.Contains(types, reflect.TypeOf(err)) {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			break
		}
		err = next
	}
	return err
}
