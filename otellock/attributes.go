package otellock

import (
	"errors"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"

	"github.com/lockkit/lockkit/lock"
)

// Attribute keys; docs/observability.md lists where each one appears.
const (
	keyName           = attribute.Key("lock.name")
	keyKey            = attribute.Key("lock.key")
	keyOperation      = attribute.Key("lock.operation")
	keyReentrant      = attribute.Key("lock.reentrant")
	keyToken          = attribute.Key("lock.fencing_token")
	keyAcquireOutcome = attribute.Key("lock.acquire.outcome")
	keyWaitTime       = attribute.Key("lock.acquire.wait_time")
	keyHoldOutcome    = attribute.Key("lock.hold.outcome")
	keyWaited         = attribute.Key("lock.acquire.waited")
	keyQueuePosition  = attribute.Key("lock.acquire.queue_position")
	keyLossReason     = attribute.Key("lock.lost.reason")
	keyRenewalOutcome = attribute.Key("lock.renewal.outcome")
	keyErrorType      = semconv.ErrorTypeKey
)

// Values of lock.hold.outcome.
const (
	holdReleased = "released" // unlocked, and Redis confirmed it
	holdLost     = "lost"     // the lease was lost
	holdClosed   = "closed"   // the Client was closed
	holdError    = "error"    // the unlock failed
)

// Values of lock.renewal.outcome.
const (
	renewalRenewed = "renewed"
	renewalLost    = "lost"
	renewalError   = "error"
)

func operation(try bool) attribute.KeyValue {
	if try {
		return keyOperation.String("try_lock")
	}
	return keyOperation.String("lock")
}

// MaxKeyAttrLen is the longest lock.key attribute [WithRawKey] records, in
// bytes: a longer key is cut to fit, ending in "…".
const MaxKeyAttrLen = 256

// keyMarker ends a lock.key attribute cut to MaxKeyAttrLen.
const keyMarker = "…"

// keyAttr returns the lock.key attribute of key: valid UTF-8 (each run of
// bytes that is not becomes U+FFFD) and at most MaxKeyAttrLen bytes.
func keyAttr(key string) attribute.KeyValue {
	key = strings.ToValidUTF8(key, string(utf8.RuneError))
	if len(key) > MaxKeyAttrLen {
		n := MaxKeyAttrLen - len(keyMarker)
		for !utf8.RuneStart(key[n]) {
			n--
		}
		key = key[:n] + keyMarker
	}
	return keyKey.String(key)
}

// token converts a fencing token to the int64 that attributes carry.
// Tokens count acquisitions of one key and stay far below 2^63.
func token(t uint64) attribute.KeyValue {
	return keyToken.Int64(int64(t))
}

// holdOutcome classifies the cause of a [lock.Release].
func holdOutcome(cause error) string {
	switch {
	case cause == nil:
		return holdReleased
	case errors.Is(cause, lock.ErrLost):
		return holdLost
	case errors.Is(cause, lock.ErrClosed):
		return holdClosed
	}
	return holdError
}
