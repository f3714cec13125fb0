package lock_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Liveness around a lost receiver (docs/protocol.md: "a released key is
// held by a live owner within two claim windows, whatever ... a stalled
// receiver's late release do"): a waiter handed the key whose Client goes
// silent past the claim window loses the hand-off unconfirmed; when it
// then unlocks, the key passes on to the next live waiter within two
// claim windows.

// lostReceiver is waiter A of a key, on a Client whose connections go
// through a proxy, queued first while holder X keeps the key; lose hands
// it the key and makes it lose the hand-off.
type lostReceiver struct {
	srv   *locktest.Redis
	admin *redis.Client // the test's own connection
	key   string
	x     *lock.Client
	px    *locktest.Proxy
	a     *lock.Client

	unlockX lock.UnlockFunc
	done    <-chan struct{} // A's Lock returned
	res     *lockResult     // A's Lock
	token   uint64          // A's fencing token
	queue   []string        // the key's queue as X unlocked, A first
	handed  time.Time       // X's unlock returned
	lostAt  time.Time       // A's hold ended
}

// loseHandOff plays the scenario until its premise holds, three times at
// most: it starts a Redis, has X take a key with a 10 s lease and A queue
// for it (waiting up to 30 s), then calls behind to queue the test's other
// waiters, and has r.lose hand A the key and make it lose the hand-off,
// calling released after X's unlock.
func loseHandOff(t *testing.T, prefix string, behind, released func(r *lostReceiver)) *lostReceiver {
	t.Helper()
	const tries = 3
	for try := 1; ; try++ {
		r := queueLostReceiver(t, prefix)
		behind(r)
		if r.lose(t, released) {
			return r
		}
		if try == tries {
			t.Fatalf("premise: A's Client confirmed the hand-off before its silence, %d times in a row", tries)
		}
		t.Logf("premise: A's Client confirmed the hand-off before its silence (try %d): again", try)
	}
}

// queueLostReceiver starts a Redis, has X take a key with a 10 s lease
// and A queue for it (waiting up to 30 s).
func queueLostReceiver(t *testing.T, prefix string) *lostReceiver {
	t.Helper()
	srv, admin := locktest.NewRedis(t)
	r := &lostReceiver{srv: srv, admin: admin, key: prefix + randKey()}
	r.x = locktest.NewClient(t, srv.Client(t))
	_, r.unlockX = locktest.MustLock(t, r.x, context.Background(), r.key, lock.WithLease(10*time.Second))
	r.px = locktest.StartProxy(t, srv.Addr)
	prdb := redis.NewClient(&redis.Options{Addr: r.px.Addr()})
	t.Cleanup(func() { _ = prdb.Close() })
	r.a = locktest.NewClient(t, prdb)
	r.done, r.res = lockAsync(r.a, context.Background(), r.key, lock.WithMaxWait(30*time.Second))
	waitQueued(t, admin, r.key, 1)
	return r
}

// lose has X unlock, handing the key to A, then calls released (if not
// nil); once A holds the key its Client goes silent (the proxy freezes:
// half-open, not closed), so its confirmation never reaches Redis and A's
// hold ends within the claim window. lose returns true once the hand-off
// lapsed in Redis (the lock hash is gone), A still in the waits hash, the
// proxy still frozen. It returns false, the proxy thawed, when A's hold
// outlived the claim window: A's Client confirmed the hand-off before the
// freeze (as it does at once when it hears of the hand-off late).
func (r *lostReceiver) lose(t *testing.T, released func(r *lostReceiver)) bool {
	t.Helper()
	ctx := context.Background()
	r.queue = r.admin.LRange(ctx, "lockkit:{"+r.key+"}:queue", 0, -1).Val()
	if err := r.unlockX(); err != nil { // hands the key to A
		t.Fatal(err)
	}
	r.handed = time.Now()
	if released != nil {
		released(r)
	}
	<-r.done
	r.px.Freeze()
	if r.res.err != nil {
		r.px.Thaw(0)
		t.Fatalf("A: %v", r.res.err)
	}
	r.token, _ = lock.FencingToken(r.res.ctx, r.key)
	if !locktest.ClosedWithin(r.res.ctx.Done(), time.Until(r.handed.Add(locktest.Bound(2*time.Second)))) {
		r.px.Thaw(0)
		return false
	}
	r.lostAt = time.Now() // A's validity ran out unconfirmed
	hash := "lockkit:{" + r.key + "}"
	locktest.Eventually(t, time.Until(r.handed.Add(locktest.Bound(3*time.Second))), "the hand-off to A lapsed in Redis (three 1 s claim windows)", func() bool {
		return r.admin.Exists(ctx, hash).Val() == 0
	})
	if !r.admin.HExists(ctx, hash+":waits", r.queue[0]).Val() {
		r.px.Thaw(0)
		t.Fatalf("premise: A (%s) no longer in the waits hash %v after the hand-off", r.queue[0], time.Since(r.handed))
	}
	return true
}

// TestLostReceiverUnlockPassesKeyOn: the key is handed to waiter A, whose
// Client then stalls past the claim window, so A loses the hand-off
// unconfirmed. The next waiters belong to processes SIGKILLed before the
// hand-off; a live waiter L of another Client queues behind them. Once
// the hand-off lapsed in Redis, A's Client answers again and A unlocks
// (ErrLost). L must hold the key within two claim windows of that unlock,
// also when the Client that handed the key to A closed right after.
func TestLostReceiverUnlockPassesKeyOn(t *testing.T) {
	t.Parallel()
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
			locktest.Timed(t)
			var l <-chan struct{}
			var resL *lockResult
			r := loseHandOff(t, "lost-receiver-liveness-", func(r *lostReceiver) {
				var dead []*exec.Cmd
				for i := range tc.dead {
					env := fmt.Sprintf("LOCKKIT_CHILD_WAIT=%s,%s,1,%d", r.srv.Addr, r.key, i+2)
					dead = append(dead, locktest.StartChild(t, env, "queued"))
				}
				l, resL = lockAsync(locktest.NewClient(t, r.srv.Client(t)), context.Background(), r.key, lock.WithMaxWait(30*time.Second))
				waitQueued(t, r.admin, r.key, int64(tc.dead+2))
				for _, p := range dead {
					_ = p.Process.Kill()
					_ = p.Wait()
				}
			}, func(r *lostReceiver) {
				if tc.releaserCloses {
					_ = r.x.Close()
				}
			})
			if cause := context.Cause(r.res.ctx); !errors.Is(cause, lock.ErrLost) {
				r.px.Thaw(0)
				t.Fatalf("A's hold ended with %v, want ErrLost", cause)
			}
			r.px.Thaw(0)
			if err := r.res.unlock(); !errors.Is(err, lock.ErrLost) {
				t.Errorf("unlock of the lost receiver: %v, want ErrLost", err)
			}
			unlocked := time.Now()
			t.Logf("A unlocked %v after the hand-off; queue was %q", unlocked.Sub(r.handed), r.queue)

			locktest.Within(t, l, 40*time.Second, "L's Lock returned")
			if resL.err != nil {
				t.Fatalf("L: %v", resL.err)
			}
			defer func() { _ = resL.unlock() }()
			took := resL.at.Sub(unlocked)
			t.Logf("L holds the key %v after A's unlock", took)
			if limit := twoWindows(); took > limit {
				t.Errorf("L held the key %v after the lost receiver's unlock, want within two claim windows (%v)", took, limit)
			}
		})
	}
}
