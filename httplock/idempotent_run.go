package httplock

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// run runs next holding the run lock, stores its answer if it may, then
// releases the lock and sends the answer. r2's context is the lock
// context.
func (q *idemRequest) run(w http.ResponseWriter, r2 *http.Request, unlock lock.UnlockFunc, next func(http.ResponseWriter, *http.Request)) {
	held := r2.Context()
	tracked := lock.Held(held, q.runKey)
	rec := newRecorder(w, q.m.cfg.maxAnswerBody)
	returned := false
	defer func() {
		if !returned {
			release(unlock) // the handler panicked: nothing is stored
		}
	}()
	next(rec, r2)
	returned = true
	rec.finish()
	outcome := q.store(rec, held, tracked)
	release(unlock)
	rec.send()
	q.m.cfg.outcome(q.r.Context(), outcome)
}

// store stores the handler's answer if it may, and returns the outcome.
func (q *idemRequest) store(rec *recorder, held context.Context, tracked bool) string {
	cfg := &q.m.cfg
	why := rec.streamed
	switch {
	case why != "":
	case rec.status >= 500 || !cfg.storedStatus(rec.status):
		return "not-stored" // the app's choice: not worth a log record
	case tracked && !lock.Held(held, q.runKey):
		why = "the run lock was lost while the handler ran"
	}
	if why != "" {
		q.log().Warn("httplock: idempotent answer not stored", "reason", why)
		return "not-stored"
	}
	token, _ := lock.FencingToken(held, q.runKey) // 0 without a token
	a := &storedAnswer{fp: q.fp, status: rec.status, header: http.Header{}, body: rec.body}
	h := rec.Header()
	for _, name := range cfg.storedHeaders {
		if vs := h[name]; len(vs) > 0 {
			a.header[name] = vs
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(q.r.Context()), cfg.storeTimeout)
	defer cancel()
	ok, err := storeAnswer(ctx, q.m.rdb, q.answerKey, token, cfg.retention, a)
	switch {
	case err != nil:
		q.log().Warn("httplock: storing an idempotent answer failed", "error", err)
		return "store-failed"
	case !ok:
		q.log().Warn("httplock: idempotent answer not stored", "reason", "a newer answer is stored")
		return "not-stored"
	}
	return "ran"
}

// notObtained answers a request whose run lock was not taken.
func (q *idemRequest) notObtained(w http.ResponseWriter, err error) {
	var held *lock.NotObtainedError
	busy := errors.As(err, &held) && (held.RemainingLease > 0 || held.Reserved) ||
		errors.Is(err, lock.ErrNotObtained) && !errors.Is(err, context.DeadlineExceeded)
	if !busy {
		q.log().Error("httplock: taking an idempotency run lock failed", "error", redactedLockError(err))
		q.unavailable(w)
		return
	}
	secs := retryAfterSecs(q.m.cfg.retryAfter)
	if held != nil && held.RemainingLease > 0 {
		secs = min(secs, max(int(held.RemainingLease/time.Second), 1))
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	q.m.reject(w, q.r, http.StatusConflict, "conflict",
		"a request with this Idempotency-Key is being processed; retry in "+strconv.Itoa(secs)+" s")
}

// unavailable answers 503: Redis failed or did not answer in time.
func (q *idemRequest) unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSecs(q.m.cfg.retryAfter)))
	q.m.reject(w, q.r, http.StatusServiceUnavailable, "unavailable", "the idempotency store is unavailable")
}

// log is the logger with the request's method, route and key digest.
func (q *idemRequest) log() *slog.Logger {
	l := q.m.cfg.logger
	if l == nil {
		l = slog.Default()
	}
	return l.With("method", q.r.Method, "route", q.route, "key_digest", keyDigest(q.answerKey))
}

// redactedLockError is err without the lock key, which holds the
// Idempotency-Key: the kind of failure, or the innermost error of a
// Redis failure.
func redactedLockError(err error) string {
	switch {
	case errors.Is(err, lock.ErrClosed):
		return "the lock client is closed"
	case errors.Is(err, lock.ErrNotObtained):
		return "Redis did not answer in time"
	case errors.Is(err, lock.ErrInvalid):
		return "invalid lock options"
	}
	for next := errors.Unwrap(err); next != nil; next = errors.Unwrap(err) {
		err = next
	}
	return "Redis failed: " + err.Error()
}
