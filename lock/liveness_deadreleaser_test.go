package lock_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Liveness with dead releasers: when the process that released a key (and
// was to check that its hand-off was taken) dies or closes its Client, the
// live waiters still get the key within two claim windows.

// releaser is a child process that takes a key, says so, and releases it
// and exits at once when told (see releaseOnce).
type releaser struct {
	cmd   *exec.Cmd
	stdin io.Writer
	out   *bufio.Reader
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

// pubsubGate holds back what pub/sub connections (those that sent a
// SUBSCRIBE) read while it is shut, as a slow or broken network path
// would; commands are not affected.
type pubsubGate struct {
	mu   sync.Mutex
	open chan struct{} // closed while the gate is open
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

func newPubsubGate() *pubsubGate {
	g := &pubsubGate{open: make(chan struct{})}
	close(g.open)
	return g
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

// A releasing Client's release hands the key to a waiter whose process is
// dead, and the releasing Client ends right after: its process dies (a
// crash, an exit without Close), or it closes (a graceful shutdown, as a
// service does on every deploy: Close drops the pending check). Only the
// releasing Client would have checked the hand-off; nobody else heard of
// it. A live waiter of a third Client, queued behind the dead one, still
// gets the key within two claim windows ("a released key whose next
// waiters are dead or gone is obtainable within two claim windows"; "no
// wake-up is ever lost").
func TestLiveWaiterGetsKeyWhenReleaserEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// hold takes key and returns the release that ends the releaser.
		hold func(t *testing.T, srv *redistest.Server, key string) (release func())
	}{
		{"releaser process dies", func(t *testing.T, srv *redistest.Server, key string) func() {
			child := startReleaser(t, srv.Addr, key)
			child.held(t)
			return func() { child.release(t) }
		}},
		{"releaser closes its Client", func(t *testing.T, srv *redistest.Server, key string) func() {
			holder, err := lock.New(srv.Client(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = holder.Close() })
			_, unlock := locktest.MustLock(t, holder, context.Background(), key, lock.WithLease(holderLease))
			return func() {
				if err := unlock(); err != nil {
					t.Fatal(err)
				}
				if err := holder.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "ho-releaser-ends-" + randKey()
			release := tc.hold(t, srv, key)
			queueDeadWaiter(t, rdb, key, "dead:1") // its process is gone
			done, res := lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
			waitQueued(t, rdb, key, 2)
			waitSubscribed(t, rdb, key, 1)
			time.Sleep(50 * time.Millisecond) // its attempt after the subscription made

			release()
			handed := time.Now()
			if o := ownerIn(t, rdb, key); o != "dead:1" || !locktest.Held(t, rdb, "lockkit:{"+key+"}") {
				t.Fatalf("the release did not hand the key to the dead waiter (owner %q)", o)
			}
			waitTaken(t, done, res, handed, twoWindows(), "live waiter of a third Client")
		})
	}
}

// As the row "releaser closes its Client" of
// TestLiveWaiterGetsKeyWhenReleaserEnds, for many keys, each holder
// closing the moment its unlock returns: Close finds the check its release
// scheduled (the release's reply schedules it before the unlock returns),
// so the live waiter, queued behind dead waiters of three other Clients
// (its own watchers, so the release tells it nothing), does not sleep
// until the holder's lease ends.
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
		handed time.Time // when its unlock returned: the hand-off to the dead waiter
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
		r.done, r.res = lockAsync(live, ctx, r.key) // no wait limit: setting up 100 rounds may outlast one under load
		waitQueued(t, rdb, r.key, 4)
		waitSubscribed(t, rdb, r.key, 1)
		queueDeadWaiter(t, rdb, r.key, "deadD:1")
		waitQueued(t, rdb, r.key, 5)
	}
	time.Sleep(50 * time.Millisecond) // the live waiters' attempts were made after their subscriptions

	for _, r := range rounds {
		if err := r.unlock(); err != nil {
			t.Fatal(err)
		}
		r.handed = time.Now()
		// Checked before Close, well within the dead waiter's 1 s claim
		// window, after which its watchers pass the key on.
		if o := ownerIn(t, rdb, r.key); o != "dead:1" {
			t.Fatalf("%s: the release did not hand the key to the dead waiter (owner %q)", r.key, o)
		}
		if err := r.holder.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Each key is handed over as its holder unlocks: its waiter's bound
	// counts from there, however long the 100 unlocks and Closes take.
	bound := twoWindows()
	var late []string
	for _, r := range rounds {
		select {
		case <-r.done:
			if r.res.err != nil {
				t.Errorf("%s: %v", r.key, r.res.err)
			} else if d := r.res.at.Sub(r.handed); d > bound {
				late = append(late, fmt.Sprintf("%s (%v)", r.key, d.Round(time.Millisecond)))
			}
		case <-time.After(time.Until(r.handed.Add(bound))):
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
		t.Errorf("%d of %d live waiters did not get their key within %v of the hand-off to a dead waiter (they wait for the holder's %v lease): %v",
			len(late), n, bound, holderLease, late)
	}
}

// The holder is a child process that releases and exits at once (no check
// of its own), handing the key to a dead waiter (deadA:1) at the front of
// queues of 2 to 19 waiters, dead ones of processes A to D and one live
// waiter: only the watchers the hand-off tells can notice the dead
// receiver, and the live waiter must get the key within two claim windows
// wherever it stands: right behind the receiver, 16th to 18th behind it
// (past the 16 the hand-off looks at), behind other dead Clients, with a
// dead Client's waiter last, or the receiver's own Client's; the last
// watcher is the last waiter of a Client not told yet, not of the
// receiver's Client.
func TestLiveWaiterWhereverItStands(t *testing.T) {
	t.Parallel()
	deadA := func(n int) []string { // waiters of the receiver's process
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("deadA:%d", i+2))
		}
		return s
	}
	for _, tc := range []struct {
		name  string
		queue []string // "live", or the owner of a dead waiter; the first gets the key
	}{
		{"right behind the receiver", []string{"deadA:1", "live"}},
		{"last of 16", append(append([]string{"deadA:1"}, deadA(14)...), "live")},
		{"last of 17", append(append([]string{"deadA:1"}, deadA(15)...), "live")},
		{"last of 18", append(append([]string{"deadA:1"}, deadA(16)...), "live")},
		{"last of 18, two dead Clients in front", append(append([]string{"deadA:1", "deadB:1", "deadC:1"}, deadA(14)...), "live")},
		{"16th behind, a dead Client last", append(append([]string{"deadA:1"}, deadA(15)...), "live", "deadD:1")},
		{"17th behind, the receiver's Client last", append(append([]string{"deadA:1"}, deadA(15)...), "deadB:1", "live", "deadA:99")},
		{"behind two dead Clients, the receiver's Client last", []string{"deadA:1", "deadB:1", "deadC:1", "live", "deadA:2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, rdb := newReal(t)
			ctx := context.Background()
			key := "releaser-exits-" + randKey()
			holder := startReleaser(t, srv.Addr, key)
			holder.held(t)
			var live <-chan struct{}
			var res *lockResult
			for i, w := range tc.queue {
				if w == "live" {
					live, res = lockAsync(locktest.NewClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(holderLease+3*time.Second))
					waitQueued(t, rdb, key, int64(i+1))
					waitSubscribed(t, rdb, key, 1)
					time.Sleep(50 * time.Millisecond) // the attempt after the subscription made
					continue
				}
				queueDeadWaiter(t, rdb, key, w)
				waitQueued(t, rdb, key, int64(i+1))
			}
			holder.release(t)
			handed := time.Now()
			if o := ownerIn(t, rdb, key); o != tc.queue[0] {
				t.Fatalf("premise: the key went to %q, want %s", o, tc.queue[0])
			}
			waitTaken(t, live, res, handed, twoWindows(), "the live waiter")
		})
	}
}

// A Client keeps at most one pending check per key: a second hand-off it
// makes while its first check is pending (here: A hands the key to B, B
// hands it back to A's other waiter, which hands it to a dead waiter) gets
// no check of its own. The pending one runs a claim window after the first
// hand-off, while the dead waiter still holds the key, and does nothing;
// nobody checks after the dead waiter's window.
func TestHandOffDuringPendingCheckReachesLiveWaiter(t *testing.T) {
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
	waitTaken(t, wdone, wres, handed, twoWindows(), "live waiter of a third Client")
}
