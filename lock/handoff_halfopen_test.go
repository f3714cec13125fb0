package lock_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestHalfOpenSubscriptionKeepsWaiterPlace ("no wake-up is ever lost",
// FIFO): a waiter's Client reaches Redis through a proxy that stops
// forwarding on the pub/sub connection, without closing it, right after
// something was delivered on it, and the key is released and handed to
// that waiter, whose message is lost: at once, or 1.4 s after the cut,
// once the unanswered health-check PING made every waiter try once. The
// waiter must still get the key within two claim windows of the
// release, and before the waiter queued behind it.
func TestHalfOpenSubscriptionKeepsWaiterPlace(t *testing.T) {
	t.Parallel() // long: waits for the connection to be found dead
	for _, tc := range []struct {
		name  string
		after time.Duration // from the cut to the release
	}{
		{"released at once", 0},
		{"released after the waiters' re-check", 1400 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) { halfOpenWaiterKeepsPlace(t, tc.after) })
	}
}

func halfOpenWaiterKeepsPlace(t *testing.T, after time.Duration) {
	srv, admin := newReal(t)
	proxy := locktest.StartProxy(t, srv.Addr)
	wrdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = wrdb.Close() })
	waiter := locktest.NewClient(t, wrdb)
	holder := locktest.NewClient(t, srv.Client(t))
	behind := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	key := "half-open-place-" + randKey()
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
	first, firstRes := lockAsync(waiter, ctx, key)
	waitQueued(t, admin, key, 1)
	waitSubscribed(t, admin, key, 1)
	second, secondRes := lockAsync(behind, ctx, key)
	waitQueued(t, admin, key, 2)
	waitSubscribed(t, admin, key, 2)

	// The waiter's pub/sub connection is silent now: the cut comes right
	// after the next thing it delivers (the health check's answer).
	locktest.Within(t, proxy.CutPubSubAfterNextDelivery(), 10*time.Second, "a delivery on the pub/sub connection")
	time.Sleep(after)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	secondFirst := false
	select {
	case <-first:
	case <-second: // the waiter behind went first: let the first one in
		secondFirst = true
		if secondRes.err != nil {
			t.Fatal(secondRes.err)
		}
		t.Errorf("the waiter queued behind got the key first, %v after the release", secondRes.at.Sub(released))
		_ = secondRes.unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("neither waiter got the key within 10 s of the release")
	}
	locktest.Within(t, first, 10*time.Second, "the waiter on the half-open connection")
	if firstRes.err != nil {
		t.Fatal(firstRes.err)
	}
	took := firstRes.at.Sub(released)
	_ = firstRes.unlock()
	if !secondFirst {
		acquired(t, second, secondRes, "the waiter behind")
	}
	t.Logf("the waiter on the half-open connection got the key %v after the release", took)
	if took > 2*time.Second {
		t.Errorf("the waiter on the half-open connection got the key %v after the release, want within two claim windows (2 s)", took)
	}
}

// TestWaitingCostsOnePingPerClaimWindow ("no polling"): a Client whose 20
// Lock calls wait for 20 held keys, on a healthy connection, sends Redis
// one PING per claim window of silence on its pub/sub connection and no
// other command, whatever the number of waiters.
func TestWaitingCostsOnePingPerClaimWindow(t *testing.T) {
	t.Parallel() // long: waits several claim windows
	srv, admin := newReal(t)
	holder := locktest.NewClient(t, srv.Client(t))
	waiter := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const n = 20
	for i := range n {
		key := "ping-cost-" + randKey() + "-" + string(rune('a'+i))
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(time.Minute))
		done, res := lockAsync(waiter, ctx, key)
		t.Cleanup(func() {
			_ = unlock()
			<-done
			if res.unlock != nil {
				_ = res.unlock()
			}
		})
		waitQueued(t, admin, key, 1)
	}
	time.Sleep(200 * time.Millisecond) // every subscription confirmed, every attempt made
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const watched = 3500 * time.Millisecond
	time.Sleep(watched)
	stats := admin.Info(ctx, "commandstats").Val()
	pings, others := 0, 0
	for _, line := range bytes.Split([]byte(stats), []byte("\n")) {
		name, rest, ok := bytes.Cut(line, []byte(":calls="))
		if !ok {
			continue
		}
		calls := 0
		for _, c := range rest {
			if c < '0' || c > '9' {
				break
			}
			calls = calls*10 + int(c-'0')
		}
		switch string(bytes.TrimPrefix(name, []byte("cmdstat_"))) {
		case "ping":
			pings += calls
		case "info", "config|resetstat":
		default:
			others += calls
		}
	}
	t.Logf("%d waiters, %v: %d PINGs, %d other commands", n, watched, pings, others)
	if pings < 2 || pings > 4 {
		t.Errorf("%d PINGs in %v of waiting, want one per claim window of silence (3)", pings, watched)
	}
	if others > 0 {
		t.Errorf("%d other commands while %d waiters waited for held keys, want none", others, n)
	}
}
