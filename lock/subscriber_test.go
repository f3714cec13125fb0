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
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

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

// TestCloseWhileSubscriptionReconnects: the pub/sub connection is killed
// and Redis stalls at once, so the receive loop is reconnecting (its new
// connection's HELLO unanswered, go-redis ReadTimeout -1: no read
// deadline at all) when Close is called. Close returns within 1 s; the
// goroutine stuck in go-redis's read ends when Redis answers again, as
// Close's doc says, and then none is left.
func TestCloseWhileSubscriptionReconnects(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, admin := newReal(t)
	before := goleak.IgnoreCurrent()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: -1})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := "close-reconnect-" + randKey()
	holdByGhost(t, admin, key, time.Minute) // no goroutines of a holder to tell apart
	done, _ := lockAsync(c, ctx, key)
	waitSubscribed(t, admin, key, 1)
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	time.Sleep(300 * time.Millisecond) // the loop saw the EOF and redials
	took := timed(func() { _ = c.Close() })
	if took > locktest.Bound(time.Second) {
		t.Errorf("Close took %v while the subscription reconnected to a stalled Redis", took)
	}
	locktest.Within(t, done, time.Second, "the waiter after Close")
	srv.Resume()
	_ = rdb.Close()
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close, Redis answering again and rdb.Close: %v", err)
	}
}

// TestSubscriptionAcrossRedisDown: Redis goes down (2 s) while a waiter
// waits and comes back empty. While it is down the receive loop redials at
// most about every 100 ms (no busy loop); once it is back, the
// resubscription wakes the waiter, which takes the now free key at once
// rather than at the old holder's lease end.
func TestSubscriptionAcrossRedisDown(t *testing.T) {
	t.Parallel()
	srv, admin := newReal(t)
	var dials atomic.Int64
	dialer := func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	wrdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: dialer})
	t.Cleanup(func() { _ = wrdb.Close() })
	waiter := locktest.NewClient(t, wrdb)
	ctx := context.Background()
	key := "down-" + randKey()
	holdByGhost(t, admin, key, 30*time.Second)
	done, res := lockAsync(waiter, ctx, key)
	waitSubscribed(t, admin, key, 1)
	waitQueued(t, admin, key, 1)
	srv.Stop()
	before := dials.Load()
	time.Sleep(2 * time.Second)
	n := dials.Load() - before
	t.Logf("%d dials in 2 s with Redis down", n)
	if n > 40 {
		t.Errorf("%d dials in 2 s with Redis down: a busy loop", n)
	}
	back := time.Now()
	srv.Restart()
	locktest.Within(t, done, 5*time.Second, "the waiter")
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer func() { _ = res.unlock() }()
	d := res.at.Sub(back)
	t.Logf("the waiter got the key %v after Redis was restarted", d)
	if d > time.Second+locktest.Bound(500*time.Millisecond) {
		t.Errorf("the waiter got the free key %v after Redis was restarted, want within 1.5 s", d)
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
