package httplock

import (
	"context"
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
	if !httpkit.Busy(err) {
		if q.r.Context().Err() == nil { // else the client went away
			q.log().Error("httplock: taking an idempotency run lock failed", "error", httpkit.Reason(err))
		}
		q.unavailable(w)
		return
	}
	secs := httpkit.BusyRetryAfter(q.m.cfg.retryAfter, err)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	q.m.reject(w, q.r, http.StatusConflict, "conflict",
		"a request with this Idempotency-Key is being processed; retry in "+strconv.Itoa(secs)+" s")
}

// unavailable answers 503: Redis failed or did not answer in time.
func (q *idemRequest) unavailable(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(httpkit.RetryAfter(q.m.cfg.retryAfter)))
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
