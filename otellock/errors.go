package otellock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"syscall"

	"github.com/redis/go-redis/v9"

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
	{lock.ErrOutOfMemory, "OOM"}, // as Redis's own error reply
	{lock.ErrReplicaAck, "lock.ErrReplicaAck"},
	{context.Canceled, "context.Canceled"},
	{context.DeadlineExceeded, "context.DeadlineExceeded"},
	{redis.ErrClosed, "redis.ErrClosed"},
	{redis.ErrPoolTimeout, "redis.ErrPoolTimeout"},
	{redis.ErrPoolExhausted, "redis.ErrPoolExhausted"},
	{io.EOF, "io.EOF"}, // Redis closed the connection
	{io.ErrUnexpectedEOF, "io.ErrUnexpectedEOF"},
	{os.ErrDeadlineExceeded, "timeout"}, // a read or write deadline of a connection
	{syscall.ECONNREFUSED, "connection_refused"},
	{syscall.ECONNRESET, "connection_reset"},
	{syscall.EPIPE, "broken_pipe"},
	{syscall.EHOSTUNREACH, "host_unreachable"},
	{syscall.ENETUNREACH, "network_unreachable"},
}

// maxRedisCode is the longest error code of a Redis error reply that is
// its error.type.
const maxRedisCode = 24

// errorType returns the low-cardinality error.type of err: the name of a
// lockkit, context, go-redis or io sentinel it matches ("lock.ErrClosed",
// "redis.ErrPoolTimeout", "io.EOF"); "timeout" for a network timeout;
// "connection_refused", "connection_reset", "broken_pipe",
// "host_unreachable" or "network_unreachable" for those system errors;
// the error code of a Redis error reply, as the semantic conventions of
// databases have it ("OOM", "READONLY", "NOSCRIPT", "ERR"); else the Go
// type of the first error in its chain that is not made by fmt.Errorf or
// errors.Join (of a join, the first error is followed), such as
// "*net.DNSError"; "_OTHER" when that is a plain text error.
func errorType(err error) string {
	for _, n := range namedErrors {
		if errors.Is(err, n.err) {
			return n.name
		}
	}
	first := unwrap(err, wrapTypes)
	var ne net.Error
	if errors.As(first, &ne) && ne.Timeout() {
		return "timeout"
	}
	var re redis.Error
	if errors.As(first, &re) {
		if code := redisCode(re.Error()); code != "" {
			return code
		}
	}
	if t := reflect.TypeOf(first); t != textType {
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

// redisCode returns the error code that starts the message of a Redis
// error reply, such as "OOM" or "READONLY", or "" when it does not start
// with one: 1 to maxRedisCode upper-case letters followed by a space or
// the end.
func redisCode(msg string) string {
	for i := 0; i <= len(msg) && i <= maxRedisCode; i++ {
		if i == len(msg) || msg[i] == ' ' {
			return msg[:i]
		}
		if msg[i] < 'A' || msg[i] > 'Z' {
			return ""
		}
	}
	return ""
}
