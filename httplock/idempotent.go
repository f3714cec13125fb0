package httplock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// Idempotency is the Idempotency-Key middleware (IETF
// draft-ietf-httpapi-idempotency-key-header-07): the first request with a
// key runs the handler under a lock and its answer is stored in Redis; a
// retry with the same key gets that answer replayed. [Idempotency.Handler]
// serves net/http, [Idempotency.Serve] other routers (package ginlock
// adapts it to gin). It is safe for concurrent use. The answers follow the
// draft's sections "Idempotency Enforcement Scenarios" and "Error
// Scenarios"; the lookup key is the composite (method, route, scope, key)
// its "Security Considerations" recommend.
//
// For each request, with K the value of its Idempotency-Key header:
//   - without the header, the handler runs as if there were no middleware
//     ("bypass"), or, with [WithKeyRequired], the request is answered 400;
//     more than one header, or a value that is no valid key, is answered
//     400 (see [IdempotencyKeyHeader] for the syntax), and so is an empty
//     scope (see [WithScope]);
//   - the body is read, up to [WithMaxRequestBody] (larger: 413), for the
//     request's fingerprint: SHA-256 of the method, the escaped path and
//     query, and the body; the handler reads the same body afterwards. A body shorter
//     than its Content-Length, read by an earlier middleware that did not
//     give it back, is answered 500 (logged at level Error): its
//     fingerprint would be that of another body (a chunked body read so
//     cannot be told from an empty one);
//   - the answer stored for method, route, scope and K is looked up (one
//     HMGET). When there is one with the same fingerprint, it is replayed
//     byte for byte (status, stored headers, body; trailers are sent with
//     the first answer only) with the header
//     Idempotent-Replayed: true and the handler does not run; with another
//     fingerprint, the answer is 422 Unprocessable Content (the key was
//     reused for another request);
//   - otherwise the run lock of the key is taken with TryLock and
//     [lock.WithHoldUntilUnlock]. When another request holds it (the first
//     one still runs), the answer is 409 Conflict with Retry-After; when
//     Redis fails or the two lookups and the acquisition together take
//     longer than the acquire timeout (or the request's deadline, if
//     sooner), 503 Service Unavailable with Retry-After, and the handler
//     does not run
//     (the answers of [New]: see [WithIdempotencyAcquireTimeout],
//     [WithIdempotencyRetryAfter] and [WithIdempotencyLockOptions]);
//   - with the lock, the answer is looked up again (the first request may
//     have finished in between) and replayed if there is one; else the
//     handler runs with the lock context as its request's context (held
//     past a client disconnect) and its answer held back (see below);
//   - when the handler returns, its answer is stored when it is storable:
//     its status passes [WithStoredStatus] (never a 5xx), its body fits
//     [WithMaxAnswerBody], the handler did not flush or hijack, nor call
//     WriteHeader with a 5xx status after the header (too late to send,
//     as with net/http, but the run failed), and the lock still holds the
//     key. The store (one script call on one key, each attempt bounded
//     by [WithStoreTimeout]) is fenced by the run lock's fencing token
//     ([lock.FencingToken]): it is refused when an answer with the same or
//     a newer token is stored, so a run whose lease lapsed never
//     overwrites the answer of a later run. A Locker whose lock context
//     has no token (a [lock.NewQuorum] Client, a Locker of your own)
//     stores with token 0, written only where no answer is stored. The
//     stored answer has a TTL of [WithRetention];
//   - then the lock is released (the answer waits for the release 100 ms
//     at most), and the answer is sent. When the first attempt to store
//     fails or times out, the answer is sent at once and the lock is kept
//     while the store is retried, until Redis takes the answer or the
//     hold ends (see [WithStoreTimeout]): a retry of the request meanwhile
//     is answered 409 (503 while Redis does not answer), and runs the
//     handler again only if Redis stayed away past the lease's validity,
//     as after a crash. A handler that panics releases the lock, stores
//     nothing, and the panic goes on.
//
// An answer is a Redis hash under [WithKeyPrefix] + "answer:" and the
// escaped method, route, scope and K; the run lock's key is the same
// with "run:", values escaped as in key templates (see "Key templates"
// in the package documentation). The two may live in different Redis
// Cluster slots, or rdb may be another Redis than the locker's.
//
// Answers of the middleware itself are RFC 9457 problem bodies. A key
// held by another request (409), a replay and a mismatch (422) are not
// failures of the server: see [WithOutcome]. Logs never hold the key, the
// scope or a body.
type Idempotency struct {
	locker lock.Locker
	rdb    redis.UniversalClient
	cfg    idempotencyConfig
}

// NewIdempotency returns the Idempotency-Key middleware taking run locks
// from locker and keeping answers in rdb (which may be another deployment
// than the locker's, or a Redis Cluster). A nil locker or rdb (also a nil
// pointer in the interface) or an invalid option is an error wrapping
// [lock.ErrInvalid] that names the problem.
func NewIdempotency(locker lock.Locker, rdb redis.UniversalClient, opts ...IdempotencyOption) (*Idempotency, error) {
	cfg, err := newIdempotencyConfig(opts)
	switch {
	case err != nil:
	case isNilValue(locker):
		err = fmt.Errorf("%w: nil Locker", lock.ErrInvalid)
	case isNilValue(rdb):
		err = fmt.Errorf("%w: nil redis.UniversalClient", lock.ErrInvalid)
	default:
		if c, ok := locker.(interface{ Integration() lock.Integration }); ok {
			if err = c.Integration().CheckLockOptions(cfg.lockOpts...); err != nil {
				err = fmt.Errorf("WithIdempotencyLockOptions: %w", err)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("httplock: NewIdempotency: %w", err)
	}
	return &Idempotency{locker: locker, rdb: rdb, cfg: cfg}, nil
}

// Idempotent returns net/http middleware serving the Idempotency-Key
// header as [Idempotency] tells, on the route of [http.Request.Pattern].
// It panics where [NewIdempotency] returns an error.
func Idempotent(locker lock.Locker, rdb redis.UniversalClient, opts ...IdempotencyOption) func(http.Handler) http.Handler {
	m, err := NewIdempotency(locker, rdb, opts...)
	if err != nil {
		panic(err)
	}
	return m.Handler
}

// Handler returns next under the middleware; the route of a request is
// its [http.Request.Pattern] (set by [http.ServeMux]), or its path when
// that is empty.
func (m *Idempotency) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.Serve(w, r, r.Pattern, next.ServeHTTP)
	})
}

// Serve serves one request under the middleware, for routers other than
// [http.ServeMux]: route names the matched route (as "/orders/{id}/pay";
// "" stands for r.URL.Path), and next runs the handler with the writer
// and request it is given, whose context is the lock context and whose
// body is the request's body, read again.
func (m *Idempotency) Serve(w http.ResponseWriter, r *http.Request, route string, next func(w2 http.ResponseWriter, r2 *http.Request)) {
	key, err := parseKey(r.Header)
	switch {
	case errors.Is(err, errNoKey) && !m.cfg.keyRequired:
		m.cfg.outcome(r.Context(), "bypass")
		next(w, r)
		return
	case errors.Is(err, errNoKey):
		m.reject(w, r, http.StatusBadRequest, "missing-key", "this route requires an Idempotency-Key header")
		return
	case err != nil:
		m.reject(w, r, http.StatusBadRequest, "invalid-key", err.Error())
		return
	}
	var scope string
	if m.cfg.scope != nil {
		if scope = m.cfg.scope(r); scope == "" {
			m.reject(w, r, http.StatusBadRequest, "missing-scope", "the request has no scope for its Idempotency-Key")
			return
		}
	}
	if route == "" {
		route = r.URL.Path
	}
	body, outcome := m.readBody(r)
	switch outcome {
	case "too-large":
		m.reject(w, r, http.StatusRequestEntityTooLarge, outcome,
			fmt.Sprintf("the request body is larger than %d bytes", m.cfg.maxRequestBody))
		return
	case "unreadable-body":
		m.reject(w, r, http.StatusBadRequest, outcome, "the request body could not be read")
		return
	case "consumed-body":
		m.logger().Error("httplock: the request body was read before the Idempotency-Key middleware",
			"method", r.Method, "route", route)
		m.reject(w, r, http.StatusInternalServerError, outcome, "the server read the request body before its fingerprint")
		return
	}
	q := &idemRequest{m: m, r: r, route: route, fp: fingerprint(r.Method, r.URL.RequestURI(), body)}
	q.answerKey, q.runKey = keys(m.cfg.prefix, r.Method, route, scope, key)
	held, unlock, answered := q.acquire(w)
	if answered {
		return
	}
	r2 := r.WithContext(held)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	q.run(w, r2, unlock, next)
}

// readBody reads r's body for the fingerprint, up to the limit; outcome
// is "" when it could, else why not.
func (m *Idempotency) readBody(r *http.Request) (body []byte, outcome string) {
	if r.ContentLength > m.cfg.maxRequestBody {
		return nil, "too-large"
	}
	if r.Body == nil || r.Body == http.NoBody {
		if r.ContentLength > 0 {
			return nil, "consumed-body"
		}
		return nil, ""
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.maxRequestBody+1))
	switch {
	case int64(len(body)) > m.cfg.maxRequestBody:
		return nil, "too-large"
	case err != nil:
		return nil, "unreadable-body"
	case int64(len(body)) < r.ContentLength:
		// Without an error, a body shorter than its Content-Length was
		// read before: its fingerprint would be another body's.
		return nil, "consumed-body"
	}
	return body, ""
}

// idemRequest is one request with an Idempotency-Key.
type idemRequest struct {
	m                 *Idempotency
	r                 *http.Request
	route             string
	fp                [32]byte
	answerKey, runKey string
}

// acquire is the acquisition phase: the stored answer is read, the run
// lock taken, and the answer read again, all within one budget, the
// acquire timeout or the request's deadline if that comes sooner. It
// returns the lock context and its unlock, or answered true when it
// answered the request itself (a replay, 409, 422 or 503).
func (q *idemRequest) acquire(w http.ResponseWriter) (held context.Context, unlock lock.UnlockFunc, answered bool) {
	budget, cancel := context.WithTimeout(q.r.Context(), q.m.cfg.acquireTimeout)
	defer cancel()
	if q.replayed(budget, w) != "" {
		return nil, nil, true
	}
	deadline, _ := budget.Deadline()
	left := time.Until(deadline)
	if left <= 0 {
		q.unavailable(w)
		return nil, nil, true
	}
	// The lock context derives from the request's context: a deadline of
	// the budget's would end the hold with it. The budget's remainder
	// bounds the attempt instead.
	opts := append(q.m.cfg.lockOpts[:len(q.m.cfg.lockOpts):len(q.m.cfg.lockOpts)], lock.WithMaxWait(left))
	held, unlock, err := q.m.locker.TryLock(q.r.Context(), q.runKey, opts...)
	if err != nil {
		q.notObtained(w, err)
		return nil, nil, true
	}
	switch q.replayed(budget, w) {
	case "":
		return held, unlock, false
	case "unavailable":
		// Redis is failing: the 503 does not wait for the release.
		go httpkit.Release(unlock)
	default:
		httpkit.Release(unlock)
	}
	return nil, nil, true
}

// replayed answers with the stored answer when there is one (or 422 when
// it is another request's, 503 when Redis failed or ctx, the acquisition
// budget, ended), and returns the outcome it reported; "" when it did not
// answer.
func (q *idemRequest) replayed(ctx context.Context, w http.ResponseWriter) string {
	a, err := loadAnswer(ctx, q.m.rdb, q.answerKey)
	switch {
	case err != nil && q.clientGone(w):
		return "client-gone"
	case err != nil:
		q.log().Error("httplock: reading a stored idempotent answer failed", "error", err)
		q.unavailable(w)
		return "unavailable"
	case a == nil:
		return ""
	case a.fp != q.fp:
		q.m.reject(w, q.r, http.StatusUnprocessableEntity, "mismatch",
			"the Idempotency-Key was used for another request")
		return "mismatch"
	}
	h := w.Header()
	for name, vs := range a.header {
		h[name] = vs
	}
	h.Set(ReplayedHeader, "true")
	w.WriteHeader(a.status)
	_, _ = w.Write(a.body)
	q.m.cfg.outcome(q.r.Context(), "replayed")
	return "replayed"
}

// reject answers with a problem body and reports outcome.
func (m *Idempotency) reject(w http.ResponseWriter, r *http.Request, status int, outcome, detail string) {
	httpkit.WriteProblem(w, status, detail)
	m.cfg.outcome(r.Context(), outcome)
}

// isNilValue reports whether v is nil or a nil pointer, map, func,
// channel, slice or interface in an interface.
func isNilValue(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return rv.IsNil()
	}
	return false
}
