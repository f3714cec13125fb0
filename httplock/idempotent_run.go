package httplock

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// run runs next holding the run lock, stores its answer if it may, then
// releases the lock and sends the answer. r2's context is the lock
// context. When the first store fails and may be tried again (see
// idempotent_retry.go), the answer is sent at once and the lock is kept,
// released by the store's retries when they end.
func (q *idemRequest) run(w http.ResponseWriter, r2 *http.Request, unlock lock.UnlockFunc, next func(http.ResponseWriter, *http.Request)) {
	held := r2.Context()
	tracked := lock.Held(held, q.runKey)
	// The hold's token, taken now: read at the store, after the lease
	// was lost, it would be 0.
	token, _ := lock.FencingToken(held, q.runKey) // 0 without a token
	rec := newRecorder(w, q.m.cfg.maxAnswerBody)
	defer func() {
		if unlock != nil {
			// The handler, or the app's code after it (the status filter,
			// the logger), panicked: nothing is stored.
			httpkit.Release(unlock)
		}
	}()
	next(rec, r2)
	rec.finish()
	outcome := "not-stored"
	if a := q.answer(rec, held, tracked); a != nil {
		var err error
		outcome, err = q.store(a, token)
		if err != nil {
			// A Locker whose holds lock.Held does not know gives no sign
			// of the hold's end: its store is not retried.
			retry := tracked && retryable(err)
			q.log().Warn("httplock: storing an idempotent answer failed", "error", err, "retrying", retry)
			if retry {
				q.keepStoring(held, unlock, a, token, err)
				unlock = nil
			}
		}
	}
	if unlock != nil {
		httpkit.Release(unlock)
		unlock = nil
	}
	rec.send()
	q.m.cfg.outcome(q.r.Context(), outcome)
}

// answer returns the handler's answer to store, or nil when it may not
// be stored (logged at level Warn, but for the app's own status filter).
func (q *idemRequest) answer(rec *recorder, held context.Context, tracked bool) *storedAnswer {
	cfg := &q.m.cfg
	why := rec.streamed
	switch {
	case why != "":
	case rec.status >= 500 || !cfg.storedStatus(rec.status):
		return nil // the app's choice: not worth a log record
	case rec.failed:
		why = "the handler set a 5xx status after its answer began"
	case tracked && !lock.Held(held, q.runKey):
		why = "the run lock was lost while the handler ran"
	}
	if why != "" {
		q.log().Warn("httplock: idempotent answer not stored", "reason", why)
		return nil
	}
	a := &storedAnswer{fp: q.fp, status: rec.status, header: http.Header{}, body: rec.body}
	for _, name := range cfg.storedHeaders {
		if vs := rec.header[name]; len(vs) > 0 {
			a.header[name] = slices.Clone(vs) // the sent header's, retried stores may read later
		}
	}
	return a
}

// store makes the first attempt to store a, fenced by token and bounded
// by the store timeout, and returns the outcome, with the attempt's error
// for "store-failed" (logged by the caller).
func (q *idemRequest) store(a *storedAnswer, token uint64) (string, error) {
	res, err := q.storeOnce(context.WithoutCancel(q.r.Context()), a, token)
	switch {
	case err != nil:
		return "store-failed", err
	case res == storeRefused:
		q.log().Warn("httplock: idempotent answer not stored", "reason", "a newer answer is stored")
		return "not-stored", nil
	}
	return "ran", nil
}

// storeOnce is one attempt to store a, bounded by the store timeout and
// ctx.
func (q *idemRequest) storeOnce(ctx context.Context, a *storedAnswer, token uint64) (storeResult, error) {
	ctx, cancel := context.WithTimeout(ctx, q.m.cfg.storeTimeout)
	defer cancel()
	return storeAnswer(ctx, q.m.rdb, q.answerKey, token, q.m.cfg.retention, a)
}

// notObtained answers a request whose run lock was not taken.
func (q *idemRequest) notObtained(w http.ResponseWriter, err error) {
	switch {
	case q.clientGone(w):
		return
	case !httpkit.Busy(err):
		q.log().Error("httplock: taking an idempotency run lock failed", "error", httpkit.Reason(err))
		q.unavailable(w)
		return
	}
	secs := httpkit.BusyRetryAfter(q.m.cfg.retryAfter, err)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	q.m.reject(w, q.r, http.StatusConflict, "conflict",
		"a request with this Idempotency-Key is being processed; retry in "+strconv.Itoa(secs)+" s")
}

// clientGone answers a request whose client went away (its context was
// cancelled) before the handler could run, and reports whether it did.
// Nobody reads the answer; the outcome is "client-gone", so that neither
// a conflict nor an unavailable Redis is counted for it.
func (q *idemRequest) clientGone(w http.ResponseWriter) bool {
	if !errors.Is(q.r.Context().Err(), context.Canceled) {
		return false
	}
	q.m.reject(w, q.r, http.StatusServiceUnavailable, "client-gone", "the client went away before the request ran")
	return true
}

// unavailable answers 503: Redis failed or did not answer in time.
func (q *idemRequest) unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(httpkit.RetryAfter(q.m.cfg.retryAfter)))
	q.m.reject(w, q.r, http.StatusServiceUnavailable, "unavailable", "the idempotency store is unavailable")
}

// log is the logger with the request's method, route and key digest.
func (q *idemRequest) log() *slog.Logger {
	return q.m.logger().With("method", q.r.Method, "route", q.route, "key_digest", keyDigest(q.answerKey))
}

// logger is the logger of [WithLogger], or the default one.
func (m *Idempotency) logger() *slog.Logger {
	if m.cfg.logger == nil {
		return slog.Default()
	}
	return m.cfg.logger
}
