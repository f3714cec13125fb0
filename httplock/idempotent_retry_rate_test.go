package httplock

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// storeCalls is a go-redis hook counting the stores of answers sent
// (EVALSHA: a store's first command).
type storeCalls struct{ n atomic.Int64 }

func (c *storeCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *storeCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "evalsha") {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *storeCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestIdempotentFastFailuresRetriedOncePerStoreTimeout keeps
// answers in a replica, which refuses every store at once (READONLY, an
// error that passes), while the run lock's Redis renews the hold: the
// store is tried again at most once per store timeout, as when Redis
// does not answer, not every 100 ms (each attempt sends the whole
// answer: 200 runs of 64 KiB answers sent Redis 218 MB/s).
func TestIdempotentFastFailuresRetriedOncePerStoreTimeout(t *testing.T) {
	e := newIdemEnv(t)
	answers := redistest.StartReplica(t, e.srv.Server).Client(t)
	calls := new(storeCalls)
	answers.AddHook(calls)
	const storeTimeout, window = 500 * time.Millisecond, 2 * time.Second
	s := replica(t, e, answers, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "paid")
	}, WithStoreTimeout(storeTimeout))
	resp, body, err := post(context.Background(), s, "k", "b")
	if err != nil || resp.StatusCode != http.StatusOK || body != "paid" {
		t.Fatalf("first request: %v %v %q, want the handler's answer", resp, err, body)
	}
	e.checkOutcomes(t, "store-failed")
	n0, t0 := calls.n.Load(), time.Now()
	time.Sleep(window)
	n, took := calls.n.Load()-n0, time.Since(t0)
	if limit := int64(took/storeTimeout) + 1; n > limit {
		t.Fatalf("%d stores tried in %v, want at most %d: one per store timeout (%v)", n, took.Round(time.Millisecond), limit, storeTimeout)
	}
	if retrying.Load() != 1 {
		t.Fatalf("%d stores being retried, want 1", retrying.Load())
	}
	_ = e.locker.Close() // ends the retries
	locktest.Eventually(t, locktest.Bound(time.Second), "the retries to end", func() bool { return retrying.Load() == 0 })
}
