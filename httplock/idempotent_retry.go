package httplock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// The store of an answer whose first attempt failed.
//
// A run whose first store fails, for a reason another attempt may not
// meet (see retryable), sends its answer at once and keeps its run lock:
// while the lock is held, a duplicate is answered 409 (or 503 while
// Redis does not answer) and no retry runs the handler again. One
// goroutine per such run (keepStoring) then
//   - waits storeRetryPause and tries again, each attempt bounded by the
//     store timeout and started a store timeout after the one before at
//     the earliest (an attempt that fails at once, on an error reply or a
//     refused connection, is not repeated every storeRetryPause: each
//     sends the whole answer), until Redis takes the answer (logged at
//     level Info) or refuses it (an answer with a newer token is stored,
//     or an error reply that is not transient: logged at level Warn);
//   - stops when the hold ends first (level Warn): the lease lost because
//     Redis stayed away past its validity, or the lock Client closed. It
//     checks the hold every holdCheck and cuts off the attempt under way
//     then: it outlives the hold by holdCheck at most;
//   - stops, likewise, once the answer's retention ([WithRetention]) has
//     passed since the first attempt: an answer stored then would have
//     expired already, and a hold renewed by another Redis than the
//     answers' (or an error reply that passes, answered forever) would
//     keep the retries and the run lock forever;
//   - then releases the run lock ([httpkit.Release]).
//
// Redis may still run an attempt its caller gave up on; the fence makes
// that harmless (see idempotent_store.lua), and a later attempt that
// finds the answer with its own token counts it stored.
const (
	// storeRetryPause is the pause between two attempts to store an
	// answer.
	storeRetryPause = 100 * time.Millisecond
	// holdCheck is how often a store being retried checks that the run
	// lock is still held.
	holdCheck = 10 * time.Millisecond
)

// retrying counts the goroutines of keepStoring still running.
var retrying atomic.Int64

// retryable reports whether a store that failed with err may be tried
// again: Redis did not answer in time or the connection failed, or Redis
// answered with an error that passes (it is loading its data, busy with
// a script, a replica since a failover, the cluster is down, the script
// left its cache). Other error replies (out of memory, a key of another
// type) and a closed go-redis client are final.
func retryable(err error) bool {
	var reply redis.Error
	switch {
	case errors.Is(err, redis.ErrClosed):
		return false
	case !errors.As(err, &reply):
		return true
	}
	for _, p := range []string{"LOADING", "READONLY", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "NOSCRIPT"} {
		if redis.HasErrorPrefix(err, p+" ") {
			return true
		}
	}
	return false
}

// keepStoring tries to store a again, fenced by token, in a goroutine of
// its own, while held holds the run lock, and releases the lock with
// unlock when it stops (see above). failed is the first attempt's error.
func (q *idemRequest) keepStoring(held context.Context, unlock lock.UnlockFunc, a *storedAnswer, token uint64, failed error) {
	retrying.Add(1)
	go func() {
		defer retrying.Add(-1)
		defer httpkit.Release(unlock)
		q.retryStore(held, a, token, failed)
	}()
}

// attemptResult is the end of one attempt of retryStore.
type attemptResult struct {
	res storeResult
	err error
}

// retryStore runs the attempts of keepStoring and logs how they ended.
func (q *idemRequest) retryStore(held context.Context, a *storedAnswer, token uint64, lastErr error) {
	base := context.WithoutCancel(q.r.Context())
	start := time.Now()
	tick := time.NewTicker(holdCheck)
	defer tick.Stop()
	var (
		results <-chan attemptResult // of the attempt under way; nil between attempts
		cancel  context.CancelFunc   = func() {}
	)
	defer func() { cancel() }()
	attempts, next := 1, start.Add(storeRetryPause)
	var began time.Time // of the attempt under way
	notStored := func(reason string, args ...any) {
		args = append([]any{"reason", reason, "attempts", attempts, "after", time.Since(start).Round(time.Millisecond)}, args...)
		q.log().Warn("httplock: idempotent answer not stored", args...)
	}
	for {
		select {
		case r := <-results:
			cancel()
			results = nil
			switch {
			case r.err == nil && r.res == storeRefused && token == 0:
				// Without a token, an earlier attempt's answer cannot be told
				// from another run's.
				notStored("an answer is stored")
				return
			case r.err == nil && r.res == storeRefused:
				notStored("a newer answer is stored")
				return
			case r.err == nil:
				q.log().Info("httplock: idempotent answer stored after retrying", "attempts", attempts,
					"after", time.Since(start).Round(time.Millisecond))
				return
			case !retryable(r.err):
				notStored("Redis refused it", "error", r.err)
				return
			}
			lastErr, next = r.err, latest(time.Now().Add(storeRetryPause), began.Add(q.m.cfg.storeTimeout))
		case now := <-tick.C:
			switch {
			case !lock.Held(held, q.runKey):
				notStored("the run lock's hold ended before Redis took the answer", "last_error", lastErr)
				return
			case now.Sub(start) >= q.m.cfg.retention:
				notStored("the answer's retention passed before Redis took it", "last_error", lastErr)
				return
			case results == nil && !now.Before(next):
				attempts++
				began = now
				results, cancel = q.attempt(base, a, token)
			}
		}
	}
}

// attempt starts one attempt to store a, under ctx and bounded by the
// store timeout, on a goroutine of its own, which ends when the attempt
// does or cancel is called: its result comes on results.
func (q *idemRequest) attempt(ctx context.Context, a *storedAnswer, token uint64) (results <-chan attemptResult, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(ctx)
	ch := make(chan attemptResult, 1)
	go func() {
		res, err := q.storeOnce(ctx, a, token)
		ch <- attemptResult{res, err}
	}()
	return ch, cancel
}

// latest returns the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
