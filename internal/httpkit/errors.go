package httpkit

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockkit/lockkit/lock"
)

// Pkg is a middleware package, as its errors show it.
type Pkg struct {
	Name            string // the prefix of error texts: "ginlock"
	ErrMissingValue error  // what a [*MissingError] matches
	// errReturned is the cause with which the handler's lock context ends
	// when the handler returns: a handler still running, detached from
	// the chain, must not take it for a client that went away.
	errReturned error
	// errOuterEnded turns a wrapped middleware away when the outer hold it
	// would re-enter is being released (a timeout answered first). It
	// counts as a held key, and the request has had its answer anyway.
	errOuterEnded error
}

// NewPkg returns the package named name (the prefix of its errors' text),
// whose missing values match errMissing.
func NewPkg(name string, errMissing error) *Pkg {
	return &Pkg{
		Name:            name,
		ErrMissingValue: errMissing,
		errReturned:     fmt.Errorf("%s: the handler chain returned and released the lock: %w", name, lock.ErrNotHeld),
		errOuterEnded: fmt.Errorf("%s: the request's hold on the key ended before the wrapped handler started: %w",
			name, lock.ErrNotObtained),
	}
}

// MissingError is the error of a request that lacks a value its key
// template needs; it matches its package's ErrMissingValue.
type MissingError struct {
	What string // e.g. `query parameter "tenant"`
	pkg  *Pkg
}

func (e *MissingError) Error() string { return e.pkg.Name + ": " + e.What + " is missing or empty" }

func (e *MissingError) Is(target error) bool { return target == e.pkg.ErrMissingValue }

// ErrMisconfigured is wrapped by the error of a template that does not
// fit its route: a server fault, answered 500, not the client's.
var ErrMisconfigured = errors.New("the key template does not fit the route")

// Busy reports whether err, an acquisition's error, says that other
// requests hold the key (or the client went away while waiting for it),
// rather than that Redis did not answer in time. Redis told the holder's
// lease (or a waiter's turn) when the key was held; without that, a
// deadline that ended the attempt, the acquisition bound's or one a
// middleware set on the request, cut off a Redis that did not answer.
func Busy(err error) bool {
	if !errors.Is(err, lock.ErrNotObtained) {
		return false
	}
	var held *lock.NotObtainedError
	if errors.As(err, &held) && (held.RemainingLease > 0 || held.Reserved) {
		return true
	}
	return !errors.Is(err, context.DeadlineExceeded)
}

// Redact returns err, an error of a request under t, to be logged: its
// text names the template instead of the request's key, which may carry
// user data, and says why the lock failed; the error it wraps is err. A
// [*MissingError] or [ErrMisconfigured], which name a value or a route and
// not the key, is returned as it is.
func (t *Template) Redact(err error) error {
	var missing *MissingError
	if errors.As(err, &missing) || errors.Is(err, ErrMisconfigured) {
		return err
	}
	return &lockError{pkg: t.pkg.Name, template: t.text, err: err}
}

type lockError struct {
	pkg, template string
	err           error
}

func (e *lockError) Error() string {
	return fmt.Sprintf("%s: lock %q: %s", e.pkg, e.template, Reason(e.err))
}

// Reason says why a lock was not taken or held, from err, without the
// key, which may carry user data: the Client is closed, the lease was
// lost, Redis did not answer in time, the lock options are invalid, or
// "Redis failed: " and the innermost error of the chain of err.
func Reason(err error) string {
	switch {
	case errors.Is(err, lock.ErrClosed):
		return "the lock client is closed"
	case errors.Is(err, lock.ErrLost):
		return "the lease was lost"
	case errors.Is(err, lock.ErrNotObtained):
		return "Redis did not answer in time"
	case errors.Is(err, lock.ErrInvalid):
		return "invalid lock options"
	}
	return "Redis failed: " + innermost(err).Error()
}

func (e *lockError) Unwrap() error { return e.err }

// innermost follows the chain of single wrapped errors to its end.
func innermost(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
