package lock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// The pipe: concurrent calls share round trips, queued calls keep their
// order, a script flush is survived.

// wire records the script commands of lock hashes whose name starts with
// lockkit:{pipe-, in the order go-redis sends them, how many round trips
// carried them, and holds back those of a hash named in hold until free
// is closed.
type wire struct {
	mu     sync.Mutex
	sent   []string // lock hash of each command
	takes  []string // lock hash of each acquire.lua command
	trips  int      // commands and pipelines that carried any
	merged int      // pipelines that carried more than one
	ctxs   []context.Context

	hold string
	free chan struct{}
}

func (w *wire) DialHook(next redis.DialHook) redis.DialHook { return next }

// scripted returns the lock hashes that cmds name, and those of the
// acquire.lua calls among them (4 keys and 6 arguments).
func (w *wire) scripted(cmds []redis.Cmder) (hashes, takes []string) {
	for _, cmd := range cmds {
		args := cmd.Args()
		if s, ok := args[0].(string); ok && strings.HasPrefix(s, "eval") && len(args) > 3 {
			if h, _ := args[3].(string); strings.HasPrefix(h, "lockkit:{pipe-") {
				hashes = append(hashes, h)
				if len(args) == 13 {
					takes = append(takes, h)
				}
			}
		}
	}
	return hashes, takes
}

func (w *wire) record(ctx context.Context, hashes, takes []string) {
	w.mu.Lock()
	w.sent = append(w.sent, hashes...)
	w.takes = append(w.takes, takes...)
	w.trips++
	if len(hashes) > 1 {
		w.merged++
	}
	w.ctxs = append(w.ctxs, ctx)
	w.mu.Unlock()
	if w.hold != "" && slices.Contains(hashes, w.hold) {
		<-w.free
	}
}

func (w *wire) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if hashes, takes := w.scripted([]redis.Cmder{cmd}); len(hashes) > 0 {
			w.record(ctx, hashes, takes)
		}
		return next(ctx, cmd)
	}
}

func (w *wire) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if hashes, takes := w.scripted(cmds); len(hashes) > 0 {
			w.record(ctx, hashes, takes)
		}
		return next(ctx, cmds)
	}
}

// count returns how many acquire.lua calls of hash were sent.
func (w *wire) count(hash string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, h := range w.takes {
		if h == hash {
			n++
		}
	}
	return n
}

// warm locks and unlocks a key the wire does not record, so that Redis has
// the scripts cached and the Client's next calls are one command each.
func warm(t *testing.T, c *lock.Client) {
	t.Helper()
	_, unlock := locktest.MustLock(t, c, context.Background(), "warm-up")
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}

// awaitTakes waits until n acquire.lua calls of hash were sent.
func awaitTakes(t *testing.T, w *wire, hash string, n int) {
	t.Helper()
	locktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d acquisitions of %s sent", n, hash), func() bool {
		return w.count(hash) >= n
	})
}

type callerMark struct{}

// Locks and unlocks of many goroutines of one Client share round trips:
// fewer round trips than script calls, some pipelines carrying several.
func TestConcurrentCallsSharePipelines(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	w := &wire{}
	rdb.AddHook(w)
	c := locktest.NewClient(t, rdb)
	const workers, pairs = 32, 50
	var wg sync.WaitGroup
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("pipe-%d", i)
			for range pairs {
				_, unlock, err := c.Lock(context.Background(), key)
				if err != nil {
					t.Error(err)
					return
				}
				if err := unlock(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("%d script calls in %d round trips, %d of them pipelines of several calls", len(w.sent), w.trips, w.merged)
	if len(w.sent) < 2*workers*pairs {
		t.Fatalf("%d script calls seen, want at least %d", len(w.sent), 2*workers*pairs)
	}
	if w.merged == 0 || w.trips >= len(w.sent) {
		t.Errorf("%d script calls took %d round trips (%d pipelines of several): concurrent calls did not share round trips",
			len(w.sent), w.trips, w.merged)
	}
}

// A call alone in the pipe runs as one command under its caller's context,
// as the Observer documentation promises: a tracing hook sees the caller's
// span as its parent.
func TestLoneCallRunsUnderCallersContext(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	w := &wire{}
	rdb.AddHook(w)
	c := locktest.NewClient(t, rdb)
	warm(t, c)
	ctx := context.WithValue(context.Background(), callerMark{}, "caller")
	_, unlock, err := c.Lock(ctx, "pipe-lone")
	if err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ctxs) != 2 || w.trips != 2 {
		t.Fatalf("%d round trips (%v), want 2 lone commands", w.trips, w.sent)
	}
	for i, ctx := range w.ctxs {
		if ctx.Value(callerMark{}) != "caller" {
			t.Errorf("command %d (%s) ran under a context without the caller's values", i, w.sent[i])
		}
	}
}

// Calls that queue behind busy senders are sent in the order they came.
func TestQueuedCallsKeepTheirOrder(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	w := &wire{hold: "lockkit:{pipe-gate}", free: make(chan struct{})}
	rdb.AddHook(w)
	c := locktest.NewClient(t, rdb)
	warm(t, c)
	ctx := context.Background()
	var gates sync.WaitGroup
	for i := range 2 { // both senders hang, one after the other
		gates.Add(1)
		go func() {
			defer gates.Done()
			if _, unlock, err := c.TryLock(ctx, "pipe-gate"); err == nil {
				_ = unlock()
			}
		}()
		awaitTakes(t, w, "lockkit:{pipe-gate}", i+1)
	}
	var order []string
	var done sync.WaitGroup
	var queued atomic.Int64
	for i := range 5 {
		key := fmt.Sprintf("pipe-order-%d", i)
		order = append(order, "lockkit:{"+key+"}")
		done.Add(1)
		go func() {
			defer done.Done()
			queued.Add(1)
			_, unlock, err := c.Lock(ctx, key)
			if err != nil {
				t.Error(err)
				return
			}
			_ = unlock()
		}()
		locktest.Eventually(t, 5*time.Second, "the call started", func() bool { return queued.Load() >= int64(i+1) })
		time.Sleep(locktest.Bound(5 * time.Millisecond)) // it has queued
	}
	close(w.free)
	done.Wait()
	gates.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	var got []string
	for _, h := range w.takes {
		if strings.HasPrefix(h, "lockkit:{pipe-order-") {
			got = append(got, h)
		}
	}
	if !slices.Equal(got, order) {
		t.Errorf("queued acquisitions were sent in the order %v, want %v", got, order)
	}
}

// SCRIPT FLUSH again and again while two Clients' goroutines contend on
// a few keys (their calls batched in pipelines): no call fails, mutual
// exclusion holds, and every goroutine makes progress.
func TestScriptFlushLosesNoCall(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	clients := []*struct{ n atomic.Int64 }{{}, {}}
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	var inside [4]atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var errs atomic.Int64
	var perG [24]atomic.Int64
	for i := range 24 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := i % 4
			key := fmt.Sprintf("flush-%d", k)
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, unlock, err := c.Lock(ctx, key)
				cancel()
				if err != nil {
					errs.Add(1)
					t.Errorf("Lock: %v", err)
					return
				}
				if n := inside[k].Add(1); n != 1 {
					t.Errorf("%d holders of %s at once", n, key)
				}
				time.Sleep(200 * time.Microsecond)
				inside[k].Add(-1)
				if err := unlock(); err != nil {
					t.Errorf("unlock: %v", err)
					return
				}
				perG[i].Add(1)
				clients[i%2].n.Add(1)
			}
		}()
	}
	for range 60 {
		time.Sleep(25 * time.Millisecond)
		if err := rdb.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("acquisitions: %d + %d, errors %d", clients[0].n.Load(), clients[1].n.Load(), errs.Load())
	for i := range perG {
		if perG[i].Load() == 0 {
			t.Errorf("goroutine %d never got its key", i)
		}
	}
}
