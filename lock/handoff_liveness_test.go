package lock_test

// A key handed to a waiter whose process died must reach the live waiters
// behind it within about two claim windows, whatever else happens: the
// releasing process dies or closes, another hand-off comes while a check
// is pending, a waiter that gives up passes the key on.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// holderLease is the holder's lease in the tests below: a live
// waiter that hears nothing sleeps until about this long after it queued.
const holderLease = 8 * time.Second

// init runs the child process of TestReleaserDiesAfterHandOffToDeadWaiter
// when LOCKKIT_PROBE_RELEASER is "addr,key": it takes key, says "held",
// waits for a line on stdin, unlocks, says "released <err>" and exits at
// once, as a process that crashes (or exits without Close) right after its
// last unlock.
func init() {
	v := os.Getenv("LOCKKIT_PROBE_RELEASER")
	if v == "" {
		return
	}
	addr, key, _ := strings.Cut(v, ",")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lock.New(rdb)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	_, unlock, err := c.Lock(context.Background(), key, lock.WithLease(holderLease))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	err = unlock()
	fmt.Println("released", err)
	os.Exit(0)
}

// ownerIn returns the owner written in key's lock hash.
func ownerIn(t *testing.T, rdb redis.Cmdable, key string) string {
	t.Helper()
	o, err := rdb.HGet(context.Background(), "lockkit:{"+key+"}", "o").Result()
	if err != nil && err != redis.Nil {
		t.Fatal(err)
	}
	return o
}

// waitTaken waits for a Lock started by lockAsync and fails unless it
// got the key no later than limit after since.
func waitTaken(t *testing.T, done <-chan struct{}, res *lockResult, since time.Time, limit time.Duration, what string) {
	t.Helper()
	locktest.Within(t, done, holderLease+5*time.Second, what+": Lock returned")
	if res.err != nil {
		t.Fatalf("%s: %v", what, res.err)
	}
	defer func() { _ = res.unlock() }()
	d := res.at.Sub(since)
	t.Logf("%s got the key %v after the dead waiter was handed it", what, d)
	if d > limit {
		t.Errorf("%s got the key %v after the key was handed to a dead waiter, want within %v (two 1 s claim windows); "+
			"it slept until the holder's lease (%v) would have ended", what, d, limit, holderLease)
	}
}

// The releasing process dies right after its release handed the key to a
// waiter whose process is dead too: a live waiter of a third Client,
// queued behind the dead one, must still get the key within two claim
// windows ("a released key whose next waiters are dead or gone is
// obtainable within two claim windows"; "no wake-up is ever lost"). Only
// the releasing Client would have checked the hand-off; nobody else heard
// of it.
func TestReleaserDiesAfterHandOffToDeadWaiter(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const key = "ho-releaser-dies"
	child := startReleaser(t, srv.Addr, key)
	child.held(t)

	queueDeadWaiter(t, rdb, key, "dead:1") // its process is gone
	done, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 2)
	waitSubscribed(t, rdb, key, 1)
	time.Sleep(50 * time.Millisecond) // its attempt after the subscription made

	child.release(t)
	handed := time.Now()
	if o := ownerIn(t, rdb, key); o != "dead:1" || !locktest.Held(t, rdb, "lockkit:{"+key+"}") {
		t.Fatalf("the release did not hand the key to the dead waiter (owner %q)", o)
	}
	waitTaken(t, done, res, handed, 2500*time.Millisecond, "live waiter of a third Client")
}

// A waiter whose last attempt was told of a hold that ends within a claim
// window is not told of a hand-off (no watcher message): it tries by itself
// within the window, finds the key handed on, and tries again when that
// window ends. Here the key is handed to a waiter in another process, the
// live waiter queues behind it (told the window), and that process at once
// hands the key on to a waiter whose process is dead and exits; the first
// releaser has exited too. The live waiter must still get the key within
// two claim windows of the second hand-off.
func TestWaiterToldShortHoldWatchesHandOffs(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const key = "ho-watcher-by-timer"
	base := "lockkit:{" + key + "}"
	first := startReleaser(t, srv.Addr, key)
	first.held(t)
	second := startReleaser(t, srv.Addr, key)
	waitQueued(t, rdb, key, 1)
	waitSubscribed(t, rdb, key, 1)
	time.Sleep(50 * time.Millisecond) // its attempt after the subscription made
	first.release(t)                  // hands the key to second, for the claim window
	second.held(t)

	done, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 2) // second stays first until it confirms
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.LInsert(ctx, base+":queue", "AFTER", ownerIn(t, rdb, key), "dead:1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, base+":waits", "dead:1", now.Add(time.Minute).UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	sub := rdb.PSubscribe(ctx, base+":released:*")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	second.release(t) // hands the key to the dead waiter and exits
	handed := time.Now()
	if o := ownerIn(t, rdb, key); o != "dead:1" {
		t.Fatalf("premise: the second release handed the key to %q, want dead:1 (within its window: %v)", o, time.Since(now))
	}
	for {
		msg, err := sub.ReceiveTimeout(ctx, 100*time.Millisecond)
		if err != nil {
			break
		}
		if m, ok := msg.(*redis.Message); ok && strings.Contains(m.Payload, " dead:1 ") && m.Channel != base+":released:dead" {
			t.Fatalf("premise: the hand-off to dead:1 was told on %s (%q): a watcher message", m.Channel, m.Payload)
		}
	}
	waitTaken(t, done, res, handed, 2500*time.Millisecond, "the waiter told a short hold")
}

// releaser is a child process that takes a key, says so, and releases it
// and exits at once when told (see init).
type releaser struct {
	cmd   *exec.Cmd
	stdin io.Writer
	out   *bufio.Reader
}

// startReleaser starts the test binary as a releaser of key on the Redis
// at addr; it is killed when the test ends.
func startReleaser(t *testing.T, addr, key string) *releaser {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// No sleep at exit under -race: the child is gone when it says so.
	cmd.Env = append(os.Environ(), "LOCKKIT_PROBE_RELEASER="+addr+","+key, "GORACE=atexit_sleep_ms=0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &releaser{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
}

// held waits until the child holds its key.
func (r *releaser) held(t *testing.T) {
	t.Helper()
	if line, err := r.out.ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("child: %q %v, want held", line, err)
	}
}

// release has the child release its key and waits until it is gone.
func (r *releaser) release(t *testing.T) {
	t.Helper()
	start := time.Now()
	if _, err := io.WriteString(r.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	line, err := r.out.ReadString('\n')
	if err != nil || line != "released <nil>\n" {
		t.Fatalf("child: %q %v, want released <nil>", line, err)
	}
	_ = r.cmd.Process.Kill() // in case it has not exited yet
	_ = r.cmd.Wait()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("premise: the child took %v to release and end", d)
	}
}

// The same with a graceful shutdown: the holder unlocks and closes its
// Client at once, as a service does on every deploy. Close drops the
// pending check (waiters.close stops the timers).
func TestReleaserClosesAfterHandOffToDeadWaiter(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const key = "ho-releaser-closes"
	holder, err := lock.New(srv.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Close() })
	_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
	queueDeadWaiter(t, rdb, key, "dead:1")
	done, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 2)
	waitSubscribed(t, rdb, key, 1)
	time.Sleep(50 * time.Millisecond)

	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	handed := time.Now()
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if o := ownerIn(t, rdb, key); o != "dead:1" {
		t.Fatalf("the release did not hand the key to the dead waiter (owner %q)", o)
	}
	waitTaken(t, done, res, handed, 2500*time.Millisecond, "live waiter of a third Client")
}

// The same for many keys, each holder closing the moment its unlock
// returns: Close must find the check its release scheduled (the release's
// replied schedules it before the unlock returns), or the live waiter,
// queued behind dead waiters of three other Clients (its own watchers, so
// the release tells it nothing), sleeps until the holder's lease ends.
// Once a replied ran after the unlock returned, 20-66 of the 100 waiters
// were late in each run.
func TestReleasersCloseRightAfterUnlock(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 100
	live := locktest.NewClient(t, srv.Client(t))
	type round struct {
		key    string
		holder *lock.Client
		unlock lock.UnlockFunc
		done   <-chan struct{}
		res    *lockResult
	}
	rounds := make([]*round, n)
	for i := range rounds {
		r := &round{key: fmt.Sprintf("ho-close-at-once-%d", i)}
		rounds[i] = r
		h, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		r.holder = h
		_, r.unlock = locktest.MustLock(t, h, ctx, r.key, lock.WithLease(holderLease))
		for j, w := range []string{"dead:1", "deadB:1", "deadC:1"} {
			queueDeadWaiter(t, rdb, r.key, w)
			waitQueued(t, rdb, r.key, int64(j+1))
		}
		r.done, r.res = lockAsync(live, ctx, r.key, lock.WithMaxWait(holderLease+2*time.Second))
		waitQueued(t, rdb, r.key, 4)
		waitSubscribed(t, rdb, r.key, 1)
		queueDeadWaiter(t, rdb, r.key, "deadD:1")
		waitQueued(t, rdb, r.key, 5)
	}
	time.Sleep(50 * time.Millisecond) // the live waiters' attempts were made after their subscriptions

	handed := time.Now()
	for _, r := range rounds {
		if err := r.unlock(); err != nil {
			t.Fatal(err)
		}
		if err := r.holder.Close(); err != nil {
			t.Fatal(err)
		}
		if o := ownerIn(t, rdb, r.key); o != "dead:1" {
			t.Fatalf("%s: the release did not hand the key to the dead waiter (owner %q)", r.key, o)
		}
	}
	limit := handed.Add(2500 * time.Millisecond)
	var late []string
	for _, r := range rounds {
		select {
		case <-r.done:
			if r.res.err != nil {
				t.Errorf("%s: %v", r.key, r.res.err)
			}
		case <-time.After(time.Until(limit)):
			late = append(late, r.key)
		}
	}
	cancel()
	for _, r := range rounds {
		<-r.done
		if r.res.err == nil {
			_ = r.res.unlock()
		}
	}
	if len(late) > 0 {
		t.Errorf("%d of %d live waiters did not get their key within 2.5 s of the hand-off to a dead waiter (they wait for the holder's %v lease): %v",
			len(late), n, holderLease, late)
	}
}

// A Client keeps at most one pending check per key: a second hand-off it
// makes while its first check is pending (here: A hands the key to B, B
// hands it back to A's other waiter, which hands it to a dead waiter) gets
// no check of its own. The pending one runs a claim window after the first
// hand-off, while the dead waiter still holds the key, and does nothing;
// nobody checks after the dead waiter's window.
func TestPendingCheckSwallowsLaterHandOff(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	const key = "ho-swallow"
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t))

	_, unlockA := locktest.MustLock(t, a, ctx, key, lock.WithLease(holderLease))
	bdone, bres := lockAsync(b, ctx, key)
	waitQueued(t, rdb, key, 1)
	a2done, a2res := lockAsync(a, ctx, key)
	waitQueued(t, rdb, key, 2)
	queueDeadWaiter(t, rdb, key, "dead:1")
	wdone, wres := lockAsync(c, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
	waitQueued(t, rdb, key, 4)
	waitSubscribed(t, rdb, key, 3)
	time.Sleep(50 * time.Millisecond)

	if err := unlockA(); err != nil { // to B: A's check is due in 1 s
		t.Fatal(err)
	}
	locktest.Within(t, bdone, 2*time.Second, "B")
	if bres.err != nil {
		t.Fatal(bres.err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := bres.unlock(); err != nil { // to A's second waiter: B's check is due in 1 s
		t.Fatal(err)
	}
	locktest.Within(t, a2done, 2*time.Second, "A's second waiter")
	if a2res.err != nil {
		t.Fatal(a2res.err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := a2res.unlock(); err != nil { // to the dead waiter, ~600 ms after A's first hand-off
		t.Fatal(err)
	}
	handed := time.Now()
	if o := ownerIn(t, rdb, key); o != "dead:1" {
		t.Fatalf("the last release did not hand the key to the dead waiter (owner %q)", o)
	}
	waitTaken(t, wdone, wres, handed, 2500*time.Millisecond, "live waiter of a third Client")
}

// pubsubGate holds back what pub/sub connections (those that sent a
// SUBSCRIBE) read while it is shut, as a slow or broken network path
// would; commands are not affected.
type pubsubGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
}

func newPubsubGate() *pubsubGate {
	g := &pubsubGate{open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *pubsubGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
		g.open = make(chan struct{})
	default:
	}
}

func (g *pubsubGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

func (g *pubsubGate) wait(done <-chan struct{}) {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
	case <-done:
	}
}

func (g *pubsubGate) dialer(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &gatedConn{Conn: conn, g: g, done: make(chan struct{})}, nil
}

type gatedConn struct {
	net.Conn
	g    *pubsubGate
	sub  atomic.Bool
	done chan struct{}
	once sync.Once
}

func (c *gatedConn) Write(b []byte) (int, error) {
	if bytes.Contains(bytes.ToLower(b), []byte("subscribe")) {
		c.sub.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *gatedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.sub.Load() {
		c.g.wait(c.done) // what arrived is delivered when the gate opens
	}
	return n, err
}

func (c *gatedConn) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// A waiter gives up while the key is handed to it (it has not heard of
// the hand-off yet: its pub/sub path is slow). Its Client takes it out of
// the queue with leave.lua, which hands the key on to the next waiter, here
// one whose process is dead. No release made that hand-off, so no
// releasing Client checks it: leave.lua tells every Client with a queued
// waiter. A live waiter of a third Client behind it must still get the key
// within two claim windows, also with the dead process's waiters on both
// sides of it.
func TestWaiterLeavingHandsToDeadWaiterUnchecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		ahead, last []string // dead waiters queued before and after the live one
	}{
		{"one dead waiter", []string{"dead:1"}, nil},
		{"dead waiters around the live one", []string{"dead:1", "dead:2"}, []string{"dead:3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "ho-leave-handoff-" + randKey()
			holder := locktest.NewClient(t, srv.Client(t))
			gate := newPubsubGate()
			grdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Dialer: gate.dialer})
			t.Cleanup(func() { _ = grdb.Close() })
			quitter := locktest.NewClient(t, grdb)
			t.Cleanup(gate.release) // before the Clients close

			_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
			qctx, cancel := context.WithCancel(ctx)
			defer cancel()
			qdone, qres := lockAsync(quitter, qctx, key)
			waitQueued(t, rdb, key, 1)
			for _, o := range tc.ahead {
				queueDeadWaiter(t, rdb, key, o)
			}
			wdone, wres := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
			waitQueued(t, rdb, key, int64(2+len(tc.ahead)))
			for _, o := range tc.last {
				queueDeadWaiter(t, rdb, key, o)
			}
			waitSubscribed(t, rdb, key, 2)
			time.Sleep(50 * time.Millisecond)

			gate.shut()
			if err := unlock(); err != nil { // to the quitter, which does not hear of it
				t.Fatal(err)
			}
			released := time.Now()
			time.Sleep(300 * time.Millisecond)
			cancel()
			locktest.Within(t, qdone, 2*time.Second, "the quitter")
			if qres.err == nil {
				t.Fatal("premise: the quitter got the key although its pub/sub was held back")
			}
			deadline := time.Now().Add(2 * time.Second)
			for ownerIn(t, rdb, key) != "dead:1" {
				if time.Now().After(deadline) {
					t.Fatalf("the quitter's leave did not hand the key to the dead waiter (owner %q)", ownerIn(t, rdb, key))
				}
				time.Sleep(5 * time.Millisecond)
			}
			handed := time.Now()
			t.Logf("quitter gave up %v after the release; dead waiter handed the key %v after it", handed.Sub(released)-300*time.Millisecond, handed.Sub(released))
			gate.release()
			waitTaken(t, wdone, wres, handed, 2500*time.Millisecond, "live waiter of a third Client")
		})
	}
}

// On Redis Cluster the releasing Client's check (acquire.lua's check
// mode) and the turn it announces with SPUBLISH on every queued Client's
// own channel of the key (a channel that is not in KEYS, in the key's
// slot) reach a live waiter of another Client behind a dead one: it gets
// the key about one claim window after the release, on every master.
func TestClusterCheckAnnouncesTurnAfterDeadReceiver(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	data := cl.Client(t)
	holder := locktest.NewClient(t, cl.Client(t))
	waiter := locktest.NewClient(t, cl.Client(t))
	ctx := context.Background()
	for _, key := range spreadKeys(t, data, 3, 1) {
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		base := "lockkit:{" + key + "}"
		now, err := data.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := data.RPush(ctx, base+":queue", "dead:1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := data.HSet(ctx, base+":waits", "dead:1", now.Add(time.Minute).UnixMilli()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := data.HSet(ctx, base, "q", 1).Err(); err != nil {
			t.Fatal(err)
		}
		done, res := lockAsync(waiter, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		for data.LLen(ctx, base+":queue").Val() != 2 {
			time.Sleep(2 * time.Millisecond)
		}
		waitShardSubscribed(t, cl, base+":released:*")
		time.Sleep(50 * time.Millisecond)
		if err := unlock(); err != nil {
			t.Fatal(err)
		}
		released := time.Now()
		if o, _ := data.HGet(ctx, base, "o").Result(); o != "dead:1" {
			t.Fatalf("%s: not handed to the dead waiter (owner %q)", key, o)
		}
		locktest.Within(t, done, holderLease+5*time.Second, "waiter on "+key)
		if res.err != nil {
			t.Fatalf("%s: %v", key, res.err)
		}
		d := res.at.Sub(released)
		t.Logf("%s: live waiter got the key %v after the release to a dead waiter", key, d)
		if d > 2*time.Second+locktest.Bound(500*time.Millisecond) {
			t.Errorf("%s: live waiter got the key %v after the release to a dead waiter, want within two claim windows", key, d)
		}
		_ = res.unlock()
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

// Close with checks pending, and Close racing a check as it fires, leaves
// no goroutine behind.
func TestCloseWithPendingChecksLeavesNoGoroutine(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	srv, rdb := newReal(t)
	ctx := context.Background()
	before := goleak.IgnoreCurrent()
	for i, wait := range []time.Duration{0, 500 * time.Millisecond, 990 * time.Millisecond, 1000 * time.Millisecond, 1005 * time.Millisecond, 1010 * time.Millisecond} {
		c, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		for k := range 20 {
			key := fmt.Sprintf("ho-close-%d-%d", i, k)
			_, unlock := locktest.MustLock(t, c, ctx, key)
			queueDeadWaiter(t, rdb, key, "dead:1")
			if err := unlock(); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(wait)
		start := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > locktest.Bound(time.Second) {
			t.Errorf("Close %v after 20 hand-offs took %v", wait, d)
		}
	}
	goleak.VerifyNone(t, before)
}

// One Client waits on many keys, each handed by a live holder to a dead
// waiter: every check of the holder (one per key) runs, and every waiter
// gets its key within two claim windows.
func TestManyKeysHandedToDeadWaiters(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	holder := locktest.NewClient(t, srv.Client(t))
	waiter := locktest.NewClient(t, srv.Client(t))
	const n = 40
	var unlocks []lock.UnlockFunc
	var dones []<-chan struct{}
	var results []*lockResult
	for i := range n {
		key := fmt.Sprintf("ho-many-%d", i)
		_, unlock := locktest.MustLock(t, holder, ctx, key, lock.WithLease(holderLease))
		queueDeadWaiter(t, rdb, key, fmt.Sprintf("dead%d:1", i%3))
		done, res := lockAsync(waiter, ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
		waitQueued(t, rdb, key, 2)
		unlocks, dones, results = append(unlocks, unlock), append(dones, done), append(results, res)
	}
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	for _, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
	}
	var worst time.Duration
	for i := range n {
		locktest.Within(t, dones[i], holderLease+5*time.Second, fmt.Sprintf("waiter %d", i))
		if results[i].err != nil {
			t.Fatalf("waiter %d: %v", i, results[i].err)
		}
		worst = max(worst, results[i].at.Sub(released))
		_ = results[i].unlock()
	}
	t.Logf("%d keys: the last waiter got its key %v after the releases", n, worst)
	if worst > 2*time.Second+locktest.Bound(500*time.Millisecond) {
		t.Errorf("a waiter got its key %v after the release to a dead waiter, want within two claim windows", worst)
	}
}
