package httplock

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// run runs next holding the run lock, stores its answer if it may, then
// releases the lock and sends the answer. r2's context is the lock
// context.
func (q *idemRequest) run(w http.ResponseWriter, r2 *http.Request, unlock lock.UnlockFunc, next func(http.ResponseWriter, *http.Request)) {
	held := r2.Context()
	tracked := lock.Held(held, q.runKey)
	// The hold's token, taken now: read at the store, after the lease
	// was lost, it would be 0.
	token, _ := lock.FencingToken(held, q.runKey) // 0 without a token
	rec := newRecorder(w, q.m.cfg.maxAnswerBody)
	returned := false
	defer func() {
		if !returned {
			httpkit.Release(unlock) // the handler panicked: nothing is stored
		}
	}()
	next(rec, r2)
	returned = true
	rec.finish()
	outcome := q.store(rec, held, tracked, token)
	httpkit.Release(unlock)
	rec.send()
	q.m.cfg.outcome(q.r.Context(), outcome)
}

// store stores the handler's answer if it may, fenced by token, and
// returns the outcome.
func (q *idemRequest) store(rec *recorder, held context.Context, tracked bool, token uint64) string {
	cfg := &q.m.cfg
	why := rec.streamed
	switch {
	case why != "":
	case rec.status >= 500 || !cfg.storedStatus(rec.status):
		return "not-stored" // the app's choice: not worth a log record
	case rec.failed:
		why = "the handler set a 5xx status after its answer began"
	case tracked && !lock.Held(held, q.runKey):
		why = "the run lock was lost while the handler ran"
	}
	if why != "" {
		q.log().Warn("httplock: idempotent answer not stored", "reason", why)
		return "not-stored"
	}
	a := &storedAnswer{fp: q.fp, status: rec.status, header: http.Header{}, body: rec.body}
	for _, name := range cfg.storedHeaders {
		if vs := rec.header[name]; len(vs) > 0 {
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
