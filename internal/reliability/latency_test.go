package reliability_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestSlowRepliesKeepLease holds a lock for three 1 s leases while every
// reply of a freshly started Redis comes 200 ms late. A round trip of a
// fifth of the lease must not cost the lease: the watchdog renews every
// third of it. Redis has not cached the renewal script yet, as after a
// restart or a failover, so the first renewal needs more than one round
// trip.
func TestSlowRepliesKeepLease(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	srv := redistest.Start(t)
	p := newProxy(t, "slow", srv.Addr)
	rdb := redis.NewClient(&redis.Options{Addr: p.Listen})
	defer rdb.Close()
	lctx, unlock, err := leaseClient(t, rdb, lease).Lock(context.Background(), "slow")
	if err != nil {
		t.Fatal(err)
	}
	if err := addToxic(p, toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]int64{"latency": 200}}); err != nil {
		t.Fatal(err)
	}
	start := now()
	select {
	case <-lctx.Done():
		t.Errorf("lease lost %s into 200 ms latency: %v", ms(now()-start), context.Cause(lctx))
	case <-time.After(3 * lease):
	}
	if err := unlock(); err != nil && lctx.Err() == nil {
		t.Errorf("unlock: %v", err)
	}
}

// signals is an Observer that signals each watchdog renewal, dropping
// what nobody reads.
type signals struct{ renewed chan lock.Renewal }

func newSignals() signals { return signals{renewed: make(chan lock.Renewal, 16)} }

func (signals) Background(ctx context.Context) context.Context { return ctx }

func (signals) AcquireStarted(ctx context.Context, _ lock.Acquire) context.Context { return ctx }

func (signals) AcquireWaiting(context.Context, lock.Acquire) {}

func (signals) AcquireEnded(ctx context.Context, _ lock.Acquire, held context.Context) context.Context {
	if held != nil {
		return held
	}
	return ctx
}

func (signals) Released(context.Context, lock.Release) {}

func (s signals) Renewed(r lock.Renewal) {
	select {
	case s.renewed <- r:
	default:
	}
}

// warmScripts makes the Redis at addr cache every lockkit script, the
// renewal's included, as any Redis has that served a lock held past a
// third of its lease.
func warmScripts(t *testing.T, addr string) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	sig := newSignals()
	c, err := lock.New(rdb, lock.WithDefaultLease(90*time.Millisecond), lock.WithObserver(sig))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, unlock, err := c.Lock(context.Background(), "warm-up")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-sig.renewed:
		if r.Err != nil {
			t.Fatalf("warm-up renewal: %v", r.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no warm-up renewal within 5 s")
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
}
