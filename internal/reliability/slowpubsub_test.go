package reliability_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// slowSubscriptions is a Redis client whose subscriptions go through
// another client, subs; every other command goes through the embedded
// one. Package lock subscribes with Subscribe on a single Redis.
type slowSubscriptions struct {
	*redis.Client
	subs *redis.Client
}

func (s slowSubscriptions) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return s.subs.Subscribe(ctx, channels...)
}

// handOffRun is what contended Lock calls did in one run of
// TestSlowPubSubKeepsKeysLive.
type handOffRun struct {
	sections int
	maxGap   time.Duration // longest time from one unlock to the next entry
	d        time.Duration
}

func (r handOffRun) rate() float64 { return float64(r.sections) / r.d.Seconds() }

// handOffWork is how long a section of contend holds its key: long
// enough that the other Clients are queued when it unlocks, so that
// unlocks hand the key over.
const handOffWork = 5 * time.Millisecond

// contend runs one goroutine per Client, each taking key, holding it for
// handOffWork, unlocking and taking it again, for d; the sections are
// exclusive, so an entry follows the previous exit.
func contend(t *testing.T, clients []*lock.Client, key string, d time.Duration) handOffRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var mu sync.Mutex
	run := handOffRun{d: d}
	var lastExit time.Time
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				_, unlock, err := c.Lock(ctx, key)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("Lock: %v", err)
					}
					return
				}
				mu.Lock()
				if !lastExit.IsZero() {
					run.maxGap = max(run.maxGap, time.Since(lastExit))
				}
				run.sections++
				mu.Unlock()
				time.Sleep(handOffWork)
				mu.Lock()
				lastExit = time.Now()
				mu.Unlock()
				if err := unlock(); err != nil {
					t.Errorf("unlock: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	return run
}

// TestSlowPubSubKeepsKeysLive has 4 Clients contend for one key, each
// Lock right after its unlock, first with healthy connections, then with
// every message of their subscriptions 200 to 2,000 ms late (a toxiproxy
// latency of 1,100 ms ± 900 ms on those connections only; commands go
// straight to Redis). Hand-offs then wait for late messages, or for the
// claim window (1 s) to lapse: throughput falls by an order of magnitude,
// but the key never stands free longer than two claim windows.
func TestSlowPubSubKeepsKeysLive(t *testing.T) {
	t.Parallel()
	const (
		lease = time.Second
		slow  = 10 * time.Second
	)
	srv := redistest.Start(t)
	warmScripts(t, srv.Addr)
	p := newProxy(t, "subscriptions", srv.Addr)
	newClients := func(subsAddr string) []*lock.Client {
		var cs []*lock.Client
		for range 4 {
			subs := redis.NewClient(&redis.Options{Addr: subsAddr})
			t.Cleanup(func() { _ = subs.Close() })
			cs = append(cs, leaseClient(t, slowSubscriptions{Client: srv.Client(t), subs: subs}, lease))
		}
		return cs
	}
	healthy := contend(t, newClients(srv.Addr), "healthy", 3*time.Second)
	if err := addToxic(p, toxic{Name: "slow", Type: "latency", Stream: "downstream", Attributes: map[string]int64{"latency": 1100, "jitter": 900}}); err != nil {
		t.Fatal(err)
	}
	late := contend(t, newClients(p.Listen), "slow", slow)
	// Removed before the proxy stops, which can leave a latency toxic's
	// goroutine behind.
	if err := removeToxic(p, "slow"); err != nil {
		t.Fatal(err)
	}
	t.Logf("healthy: %d sections in %v (%.1f/s), longest gap %v; subscriptions 200-2000 ms late: %d sections in %v (%.1f/s, %.0f× fewer), longest gap %v",
		healthy.sections, healthy.d, healthy.rate(), healthy.maxGap.Round(time.Millisecond),
		late.sections, late.d, late.rate(), healthy.rate()/late.rate(), late.maxGap.Round(time.Millisecond))
	if limit := 2 * time.Second; late.maxGap > limit {
		t.Errorf("with slow subscriptions the key stood free %v between two sections, more than two 1 s claim windows", late.maxGap)
	}
	if late.sections < 2 {
		t.Errorf("with slow subscriptions %d sections in %v", late.sections, slow)
	}
}
