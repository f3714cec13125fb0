package httplock

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// storedAnswer is an answer kept in Redis, in a hash of its own: the
// fencing token of the run that stored it, the request's fingerprint, and
// the status, the allowed headers and the body of the answer. Every field
// is binary-safe.
type storedAnswer struct {
	fp     [sha256.Size]byte
	status int
	header http.Header
	body   []byte
}

//go:embed idempotent_store.lua
var storeSource string

// storeScript writes an answer unless a newer one is stored (see the
// script). It touches one key, so the answer and the run lock may live in
// different Redis Cluster slots.
var storeScript = redis.NewScript(storeSource)

// errMalformed is the error of a stored hash that is not an answer.
var errMalformed = errors.New("httplock: the stored idempotent answer is malformed")

// bounded runs call, a Redis call, with ctx and returns its result, or
// ctx's cause as soon as ctx ends: a go-redis client without
// ContextTimeoutEnabled keeps waiting for a stalled Redis until its
// ReadTimeout (3 s by default) passes, and the call then ends in the
// background.
func bounded[T any](ctx context.Context, call func(context.Context) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// loadAnswer reads the answer stored under key with one HMGET, bounded by
// ctx: nil when there is none.
func loadAnswer(ctx context.Context, rdb redis.UniversalClient, key string) (*storedAnswer, error) {
	vals, err := bounded(ctx, func(ctx context.Context) ([]any, error) {
		return rdb.HMGet(ctx, key, "fp", "status", "headers", "body").Result()
	})
	if err != nil {
		return nil, err
	}
	if vals[0] == nil {
		return nil, nil
	}
	var a storedAnswer
	fp, _ := vals[0].(string)
	status, _ := vals[1].(string)
	headers, _ := vals[2].(string)
	body, _ := vals[3].(string)
	if len(fp) != len(a.fp) {
		return nil, errMalformed
	}
	copy(a.fp[:], fp)
	if a.status, err = strconv.Atoi(status); err != nil || a.status < 100 || a.status > 999 {
		return nil, errMalformed
	}
	if a.header, err = decodeHeader(headers); err != nil {
		return nil, err
	}
	a.body = []byte(body)
	return &a, nil
}

// storeResult is what became of a store that Redis ran.
type storeResult int

const (
	storeRefused storeResult = iota // an answer with a newer token is stored, or any with token 0
	storeWritten                    // the answer is stored now
	storeOurs                       // an answer with the same token is stored: an earlier attempt's
)

// storeAnswer writes a under key with a TTL of retention, fenced by token
// (0: none, written only where no answer is stored), bounded by ctx, and
// tells what became of it (see storeResult). When ctx ends first, Redis
// may still write the answer later.
func storeAnswer(ctx context.Context, rdb redis.UniversalClient, key string, token uint64, retention time.Duration, a *storedAnswer) (storeResult, error) {
	headers := encodeHeader(a.header)
	n, err := bounded(ctx, func(ctx context.Context) (int, error) {
		return storeScript.Run(ctx, rdb, []string{key}, strconv.FormatUint(token, 10),
			retention.Milliseconds(), a.fp[:], a.status, headers, a.body).Int()
	})
	if err != nil {
		return storeRefused, err
	}
	return storeResult(n), nil
}

// encodeHeader writes every value of h as the length-prefixed name and
// value (uvarint lengths).
func encodeHeader(h http.Header) []byte {
	var b []byte
	for name, vs := range h {
		for _, v := range vs {
			b = binary.AppendUvarint(b, uint64(len(name)))
			b = append(b, name...)
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

// decodeHeader reverses encodeHeader.
func decodeHeader(s string) (http.Header, error) {
	h := http.Header{}
	for len(s) > 0 {
		name, rest, ok := cutPart(s)
		if !ok {
			return nil, errMalformed
		}
		v, rest, ok := cutPart(rest)
		if !ok {
			return nil, errMalformed
		}
		h[name] = append(h[name], v)
		s = rest
	}
	return h, nil
}

// cutPart splits a uvarint-length-prefixed part off s.
func cutPart(s string) (part, rest string, ok bool) {
	n, k := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
	if k <= 0 || n > uint64(len(s)-k) {
		return "", "", false
	}
	return s[k : k+int(n)], s[k+int(n):], true
}
