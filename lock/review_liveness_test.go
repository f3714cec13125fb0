package lock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// claim is the claim window of package lock (docs/protocol.md, C).
const claim = time.Second

// TestLostReceiverUnlockPassesKeyOn (docs/protocol.md, liveness: "a
// released key is held by a live owner within two claim windows, whatever
// ... a stalled receiver's late release do"): the key is handed to waiter
// A, whose Client then stalls (its connections go silent, half-open, not
// closed) past the claim window, so A loses the hand-off unconfirmed. The
// next waiters belong to processes SIGKILLed before the hand-off; a live
// waiter L of another Client queues behind them. Once the hand-off lapsed
// in Redis, A's Client answers again and A unlocks (ErrLost). L must hold
// the key within two claim windows of that unlock, also when the Client
// that handed the key to A closed right after.
func TestLostReceiverUnlockPassesKeyOn(t *testing.T) {
	for _, tc := range []struct {
		name           string
		dead           int  // next waiters, each of its own killed process
		releaserCloses bool // the Client that handed the key to A closes after its unlock
	}{
		{name: "one dead next waiter", dead: 1},
		{name: "two dead next waiters", dead: 2},
		{name: "releasing Client closed", dead: 1, releaserCloses: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := context.Background()
			key := "review-lost-receiver-" + randKey()
			rk := redisKeysOf(key)

			x := newLockClient(t, srv.Client(t))
			_, unlockX, err := x.Lock(ctx, key, lock.WithLease(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			px := startProxy(t, srv.Addr)
			a := newLockClient(t, px.client(t))
			gotA := lockInBackground(a, ctx, key, lock.WithMaxWait(30*time.Second))
			waitQueueLen(t, rdb, rk, 1)
			var dead []*exec.Cmd
			for i := range tc.dead {
				dead = append(dead, startWaiterChild(t, srv.Addr, key, i+2))
			}
			l := lockInBackground(newLockClient(t, srv.Client(t)), ctx, key, lock.WithMaxWait(30*time.Second))
			waitQueueLen(t, rdb, rk, int64(tc.dead+2))
			queue := rdb.LRange(ctx, rk.queue, 0, -1).Val()
			for _, p := range dead {
				killChild(p)
			}

			if err := unlockX(); err != nil { // hands the key to A
				t.Fatal(err)
			}
			handed := time.Now()
			if tc.releaserCloses {
				_ = x.Close()
			}
			resA := <-gotA
			px.freeze() // A's Client stalls: its confirmation never reaches Redis
			if resA.err != nil {
				px.thaw()
				t.Fatalf("A: %v", resA.err)
			}
			<-resA.ctx.Done() // A's validity ran out unconfirmed
			if cause := context.Cause(resA.ctx); !errors.Is(cause, lock.ErrLost) {
				t.Fatalf("A's hold ended with %v, want ErrLost", cause)
			}
			waitGone(t, rdb, rk.hash, handed.Add(3*claim)) // the hand-off lapsed in Redis
			if !rdb.HExists(ctx, rk.waits, queue[0]).Val() {
				px.thaw()
				t.Fatalf("premise: A (%s) no longer in the waits hash %v after the hand-off", queue[0], time.Since(handed))
			}
			px.thaw()
			if err := resA.unlock(); !errors.Is(err, lock.ErrLost) {
				t.Errorf("unlock of the lost receiver: %v, want ErrLost", err)
			}
			unlocked := time.Now()
			t.Logf("A unlocked %v after the hand-off; queue was %q", unlocked.Sub(handed), queue)

			resL := <-l
			if resL.err != nil {
				t.Fatalf("L: %v", resL.err)
			}
			took := resL.at.Sub(unlocked)
			t.Logf("L holds the key %v after A's unlock", took)
			if took > 2*claim {
				t.Errorf("L held the key %v after the lost receiver's unlock, want within two claim windows (%v)", took, 2*claim)
			}
			_ = resL.unlock()
		})
	}
}

// redisKeys are the Redis keys of a lock with the default prefix
// (docs/protocol.md, the data).
type redisKeys struct{ hash, queue, waits string }

func redisKeysOf(key string) redisKeys {
	p := lock.DefaultPrefix + ":{" + key + "}"
	return redisKeys{hash: p, queue: p + ":queue", waits: p + ":waits"}
}

// newLockClient is a lock.Client on rdb, closed when the test ends.
func newLockClient(t *testing.T, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockOutcome is what a Lock call returned, and when.
type lockOutcome struct {
	ctx    context.Context
	unlock lock.UnlockFunc
	err    error
	at     time.Time
}

// lockInBackground runs c.Lock in a goroutine; the channel gets its outcome.
func lockInBackground(c *lock.Client, ctx context.Context, key string, opts ...lock.LockOption) <-chan lockOutcome {
	ch := make(chan lockOutcome, 1)
	go func() {
		lctx, unlock, err := c.Lock(ctx, key, opts...)
		ch <- lockOutcome{ctx: lctx, unlock: unlock, err: err, at: time.Now()}
	}()
	return ch
}

// waitQueueLen waits up to 10 s until the key's queue in Redis holds n
// waiters.
func waitQueueLen(t *testing.T, rdb *redis.Client, rk redisKeys, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.LLen(context.Background(), rk.queue).Val() != n {
		if time.Now().After(deadline) {
			t.Fatalf("queue %q: %d waiters, want %d", rk.queue, rdb.LLen(context.Background(), rk.queue).Val(), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitGone waits until the Redis key k no longer exists, failing the test
// at deadline.
func waitGone(t *testing.T, rdb *redis.Client, k string, deadline time.Time) {
	t.Helper()
	for rdb.Exists(context.Background(), k).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%q still exists", k)
		}
		time.Sleep(time.Millisecond)
	}
}

// startWaiterChild starts this test binary as a child process that queues
// one Lock call of key (lock/main_test.go, LOCKKIT_CHILD_WAIT) and returns
// once the key's queue holds want waiters. The child is killed when the
// test ends, if it was not before.
func startWaiterChild(t *testing.T, addr, key string, want int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,1,%d", addr, key, want))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { killChild(cmd) })
	line, err := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "queued" {
		t.Fatalf("child: %q, %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return cmd
}

// killChild ends a child process with SIGKILL and waits for it.
func killChild(cmd *exec.Cmd) {
	if cmd.ProcessState == nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// proxy forwards TCP connections to a Redis server. Frozen, it forwards
// nothing in either direction and closes nothing: every connection through
// it is half-open, as behind a network partition, until it thaws. What
// was held by the freeze goes on when it thaws, later by the delay thawLate
// gives, so that bytes sent after the thaw can overtake it.
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu     sync.Mutex
	thawed chan struct{} // closed while not frozen
	late   time.Duration // how long held bytes wait after the thaw
	sentAt time.Time     // when the last held bytes to Redis went on
	drop   string        // a reply from Redis to drop once, cutting its connection
	cut    chan struct{} // closed once drop was dropped
	conns  []net.Conn
	closed bool
}

// startProxy listens on a free loopback port and forwards to target
// until the test ends.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, thawed: make(chan struct{})}
	close(p.thawed)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// client is a go-redis client connecting through p, closed when the test
// ends (before p is).
func (p *proxy) client(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: p.ln.Addr().String()})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(out, in, false)
		go p.pipe(in, out, true)
	}
}

// pipe copies src to dst, holding what it read while p is frozen;
// fromRedis tells that src is the connection to Redis.
func (p *proxy) pipe(dst, src net.Conn, fromRedis bool) {
	defer p.wg.Done()
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			thawed := p.thawed
			p.mu.Unlock()
			held := false
			select {
			case <-thawed:
			default:
				held = true
				<-thawed
				p.mu.Lock()
				late := p.late
				p.mu.Unlock()
				time.Sleep(late)
			}
			if fromRedis && p.dropped(buf[:n]) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
			if !fromRedis && held {
				p.mu.Lock()
				p.sentAt = time.Now()
				p.mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// heldSentAt is when the last bytes to Redis that a freeze held went on
// (zero if none did).
func (p *proxy) heldSentAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sentAt
}

// dropReply makes p drop the next reply from Redis that is exactly
// reply, and close its connection, as if the network had cut it: the
// command ran, its caller never learns how. The channel is closed then.
func (p *proxy) dropReply(reply string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop, p.cut = reply, make(chan struct{})
	return p.cut
}

func (p *proxy) dropped(b []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drop == "" || string(b) != p.drop {
		return false
	}
	p.drop = ""
	close(p.cut)
	return true
}

// freeze stops forwarding: bytes in flight are held until thaw.
func (p *proxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.thawed:
		p.thawed = make(chan struct{})
	default:
	}
}

// thaw forwards again, what was held first.
func (p *proxy) thaw() { p.thawLate(0) }

// thawLate forwards again at once what is sent from now on, and what the
// freeze held after late.
func (p *proxy) thawLate(late time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.late = late
	select {
	case <-p.thawed:
	default:
		close(p.thawed)
	}
}

func (p *proxy) close() {
	p.thaw()
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
