package otellock

import (
	"fmt"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
)

// otherName is the lock.name of keys without a constant part, and of the
// locks beyond the cap of distinct names.
const otherName = "_OTHER"

// maxNameSegment is the longest key segment DefaultLockName keeps, in
// bytes.
const maxNameSegment = 32

// DefaultMaxLockNames is how many distinct lock names an [Observer]
// records unless [WithMaxLockNames] sets another cap.
const DefaultMaxLockNames = 100

// DefaultLockName is the default lock.name of a key that was not given a
// name with [lock.WithName]: the key's first ':'-separated segment when it
// looks like a word a developer wrote, otherwise "_OTHER". Such a word is
// 1 to 32 bytes of lower-case ASCII letters, '-', '_' and '.', and is not
// hex-like (8 or more bytes of the letters a to f only). Mixed case, digits
// and hex-like runs mark identifiers (tokens, digests, ids), which would
// give a metrics backend one series per user. The segments after the first
// are never kept: a letters-only segment may be a user's or a product's
// name as well as a constant.
//
//	orders:42              → orders
//	users:alice:cart       → users
//	cron:nightly-report:17 → cron
//	billing                → billing
//	3f2a9c                 → _OTHER
//	deadbeefcafe:1         → _OTHER
//	xKqPzRwTbN             → _OTHER
//
// For finer names, name the lock where it is taken ([lock.WithName], as
// packages ginlock and cronlock do) or give the Observer a name function
// with [WithLockName].
func DefaultLockName(key string) string {
	seg, _, _ := strings.Cut(key, ":")
	if !constantSegment(seg) {
		return otherName
	}
	return seg
}

// minHexLike is the length from which a segment of the letters a to f only
// is taken for a hex identifier.
const minHexLike = 8

// constantSegment reports whether s looks like a word a developer wrote.
func constantSegment(s string) bool {
	if s == "" || len(s) > maxNameSegment {
		return false
	}
	hex := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'f':
		case 'g' <= c && c <= 'z', c == '_', c == '-', c == '.':
			hex = false
		default:
			return false
		}
	}
	return !hex || len(s) < minHexLike
}

// names caps the distinct lock names an Observer records: the first max
// names are kept, later new ones become "_OTHER", and the first name over
// the cap is reported once to the OpenTelemetry error handler. The names
// of internal locks ([lock.Integration.Internal]) have a cap of their own, of the
// same size, so an integration's bookkeeping never takes the places of
// the user's locks; a name seen either way is known to both.
type names struct {
	known sync.Map // name → attribute.KeyValue
	mu    sync.Mutex
	max   int
	kinds [2]nameCount // the users' names, internal ones
}

// nameCount is how many names of one kind the cap has let in.
type nameCount struct {
	n    int
	over bool // reported
}

// attr returns the lock.name attribute of name, "_OTHER" beyond the cap of
// its kind: internal tells a lock taken with [lock.Integration.Internal].
func (ns *names) attr(name string, internal bool) attribute.KeyValue {
	if kv, ok := ns.known.Load(name); ok {
		return kv.(attribute.KeyValue)
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if kv, ok := ns.known.Load(name); ok {
		return kv.(attribute.KeyValue)
	}
	kind, what := &ns.kinds[0], "lock names"
	if internal {
		kind, what = &ns.kinds[1], "names of internal locks (lock.Integration.Internal)"
	}
	if kind.n >= ns.max {
		if !kind.over {
			kind.over = true
			otel.Handle(fmt.Errorf("otellock: more than %d distinct %s; further names are recorded as %q (name locks with lock.WithName, or see WithLockName and WithMaxLockNames)", ns.max, what, otherName))
		}
		return keyName.String(otherName)
	}
	kv := keyName.String(name)
	ns.known.Store(name, kv)
	kind.n++
	return kv
}
