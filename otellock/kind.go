package otellock

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/lockkit/lockkit/lock"
)

// The kind of an acquisition: a lock, a semaphore's permit or a read hold
// ([lock.Acquire].Kind), and a semaphore's limit.
const (
	keyKind  = attribute.Key("lock.kind")
	keyLimit = attribute.Key("lock.limit")
)

// spanKind appends to attrs the kind attributes of a span: lock.kind
// always ("lock", "semaphore" or "read"), and a semaphore's lock.limit.
func spanKind(attrs []attribute.KeyValue, kind string, limit int) []attribute.KeyValue {
	if kind == "" {
		kind = lock.KindLock
	}
	attrs = append(attrs, keyKind.String(kind))
	if kind == lock.KindSemaphore {
		attrs = append(attrs, keyLimit.Int(limit))
	}
	return attrs
}

// metricKind appends to attrs the kind attributes of a metric point:
// lock.kind of a permit or a read hold, with a semaphore's lock.limit;
// nothing for a lock, whose points keep the attributes they always had.
// A limit fixed per lock name keeps the number of points bounded.
func metricKind(attrs []attribute.KeyValue, kind string, limit int) []attribute.KeyValue {
	switch kind {
	case lock.KindSemaphore:
		return append(attrs, keyKind.String(kind), keyLimit.Int(limit))
	case lock.KindRead:
		return append(attrs, keyKind.String(kind))
	}
	return attrs
}

// kindSet is the attribute set of kvs and, per metricKind, the kind;
// for a lock it is attribute.NewSet(kvs...) and copies nothing more.
func kindSet(kind string, limit int, kvs ...attribute.KeyValue) attribute.Set {
	if kind != lock.KindSemaphore && kind != lock.KindRead {
		return attribute.NewSet(kvs...)
	}
	return attribute.NewSet(metricKind(kvs[:len(kvs):len(kvs)], kind, limit)...)
}
