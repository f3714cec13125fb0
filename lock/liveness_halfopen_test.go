package lock_test

import (
	"bytes"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Liveness with half-open and broken pub/sub connections: a waiter whose
// connection stopped delivering still gets its turn, in order; a dead
// subscription is found and replaced.

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

// halfOpen makes the pub/sub connections it dialled half-open when cut
// is called: what the client writes on them is dropped and nothing more
// reaches it, but the sockets stay up, as when the peer vanished without a
// reset. Connections dialled later work.
type halfOpen struct {
	mu    sync.Mutex
	conns []*halfOpenConn
}

func (h *halfOpen) dialer(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &halfOpenConn{Conn: conn}
	h.mu.Lock()
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	return c, nil
}

// cut makes the connections dialled so far half-open.
func (h *halfOpen) cut() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.conns {
		c.dead.Store(true)
	}
}

type halfOpenConn struct {
	net.Conn
	sub, dead atomic.Bool
}

func (c *halfOpenConn) cut() bool { return c.sub.Load() && c.dead.Load() }

func (c *halfOpenConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("subscribe")) {
		c.sub.Store(true)
	}
	if c.cut() {
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *halfOpenConn) Read(b []byte) (int, error) {
	for {
		n, err := c.Conn.Read(b)
		if err != nil || !c.cut() {
			return n, err
		}
	}
}

// holdByGhost writes key's lock hash as held by an owner of no process,
// for lease.
func holdByGhost(t *testing.T, rdb *redis.Client, key string, lease time.Duration) {
	t.Helper()
	base := "lockkit:{" + key + "}"
	ctx := context.Background()
	if err := rdb.HSet(ctx, base, "o", "ghost:1", "n", 1, "t", 1).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.PExpire(ctx, base, lease).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestHalfOpenSubscriptionIsReplaced: the pub/sub connection goes
// half-open (writes vanish, nothing arrives, no reset). The receive loop
// pings a connection silent for 5 s (a claim window while it carries
// channels) and replaces it when nothing answers within 2.25 s, so a wait
// that begins 13 s later ends at the release, not at the end of the
// holder's lease.
func TestHalfOpenSubscriptionIsReplaced(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	h := &halfOpen{}
	hrdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: h.dialer})
	t.Cleanup(func() { _ = hrdb.Close() })
	waiter := locktest.NewClient(t, hrdb)
	holder := locktest.NewClient(t, srv.Client(t))
	ctx := context.Background()
	const lease = 10 * time.Second
	// wait has the waiter wait for a held key and returns how long it took
	// to get it after the release.
	wait := func(round string) time.Duration {
		key := "half-open-" + randKey()
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(lease))
		done, res := lockAsync(waiter, ctx, key)
		waitQueued(t, rdb, key, 1)
		time.Sleep(100 * time.Millisecond) // the waiter's attempt saw the lease
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		locktest.Within(t, done, lease+5*time.Second, round)
		if res.err != nil {
			t.Fatalf("%s: %v", round, res.err)
		}
		_ = res.unlock()
		d := res.at.Sub(released)
		t.Logf("%s: the waiter got the key %v after the release", round, d)
		return d
	}
	if d := wait("before"); d > locktest.Bound(time.Second) {
		t.Fatalf("before the cut the waiter got the key only %v after the release", d)
	}
	h.cut()
	// Two health-check periods (5 s each), the ping's 1 s bound, a margin.
	time.Sleep(13 * time.Second)
	if d := wait("after"); d > locktest.Bound(2*time.Second) {
		t.Errorf("13 s after its pub/sub connection went half-open the waiter got the key %v after the release (the holder's lease is %v): the subscription was never replaced", d, lease)
	}
}

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
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			halfOpenWaiterKeepsPlace(t, tc.after)
		})
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

// The receiving waiter's pub/sub connection breaks just before the
// hand-off (a proxy restart, a network blip), so the message is lost; the
// waiter's side notices only later (held is how long). go-redis subscribes
// again, the waiter, woken by the confirmation, tries: it must get the key
// soon after, whether its hand-off is still in its claim window (then it
// confirms it, and the releasing Client's check must not take it away) or
// lapsed and was dropped by that check (then it takes the free key).
func TestPubSubReconnectAroundHandOff(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	admin := srv.Client(t)
	ctx := context.Background()
	holder := locktest.NewClient(t, srv.Client(t))
	gate := newPubsubGate()
	grdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: gate.dialer})
	t.Cleanup(func() { _ = grdb.Close() })
	waiter := locktest.NewClient(t, grdb)
	t.Cleanup(gate.release)
	for i, held := range []time.Duration{0, 200 * time.Millisecond, 700 * time.Millisecond, 1500 * time.Millisecond} {
		key := "ho-reconnect-" + randKey()
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		done, res := lockAsync(waiter, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		waitQueued(t, rdb, key, 1)
		waitSubscribed(t, rdb, key, 1)
		time.Sleep(50 * time.Millisecond)
		gate.shut()
		if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		if n := subscribers(t, rdb, key); n != 0 {
			t.Fatalf("round %d: %d subscribers after CLIENT KILL", i, n)
		}
		if err := unlock(); err != nil { // the hand-off message reaches nobody
			t.Fatal(err)
		}
		released := time.Now()
		time.Sleep(held)
		gate.release()
		locktest.Within(t, done, holderLease+5*time.Second, "the waiter")
		if res.err != nil {
			t.Fatalf("round %d: %v", i, res.err)
		}
		d := res.at.Sub(released)
		t.Logf("round %d: pub/sub back %v after the release; waiter got the key %v after the release", i, held, d)
		if d > held+locktest.Bound(500*time.Millisecond) {
			t.Errorf("round %d: pub/sub back %v after the release, but the waiter got the key only %v after it", i, held, d)
		}
		time.Sleep(1200 * time.Millisecond) // past the holder's check
		if !lock.Held(res.ctx, key) {
			t.Errorf("round %d: the hold ended: %v", i, context.Cause(res.ctx))
		}
		_ = res.unlock()
	}
}

// TestManyWaitersAcrossPubSubKill: a Client waits for 100 keys on one
// pub/sub connection; the connection is killed (CLIENT KILL TYPE pubsub)
// and every holder releases at once, while the loop reconnects. The
// resubscription's confirmations must wake every waiter: each gets its
// key within 2 s of the release, not at the holders' 10 s lease end.
func TestManyWaitersAcrossPubSubKill(t *testing.T) {
	t.Parallel()
	srv, admin := newReal(t)
	ctx := context.Background()
	holder := locktest.NewClient(t, srv.Client(t))
	waiter := locktest.NewClient(t, srv.Client(t))
	const n = 100
	const lease = 10 * time.Second
	keys := make([]string, n)
	unlocks := make([]lock.UnlockFunc, n)
	dones := make([]<-chan struct{}, n)
	results := make([]*lockResult, n)
	for i := range keys {
		keys[i] = "many-kill-" + randKey()
		_, unlocks[i] = locktest.MustLock(t, holder, ctx, keys[i], lock.WithLease(lease))
		dones[i], results[i] = lockAsync(waiter, ctx, keys[i])
	}
	for _, key := range keys {
		waitQueued(t, admin, key, 1)
		waitSubscribed(t, admin, key, 1)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	for _, unlock := range unlocks {
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
	}
	var worst time.Duration
	for i := range keys {
		locktest.Within(t, dones[i], lease+5*time.Second, keys[i])
		if results[i].err != nil {
			t.Fatalf("%s: %v", keys[i], results[i].err)
		}
		worst = max(worst, results[i].at.Sub(released))
		_ = results[i].unlock()
	}
	t.Logf("the last of %d waiters got its key %v after the releases began", n, worst)
	if worst > locktest.Bound(2*time.Second) {
		t.Errorf("a waiter got its key %v after the release, want within 2 s", worst)
	}
}
