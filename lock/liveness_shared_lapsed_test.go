package lock_test

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// lapsedBound bounds how long after its resume the waiter gets in: its
// place behind three 100 ms holds takes about half a second; the rest is
// room for a busy machine under the race detector.
const lapsedBound = 4 * time.Second

// Guarantee (issue 33, "Fair and without polling"; as for Lock, a live
// waiter that missed its turn queues again at its next attempt): a
// semaphore waiter handed a permit while its process was frozen (SIGSTOP
// 1.5 s, past the 1 s claim window) and resumed must still get a permit,
// in line behind the waiters queued meanwhile, while three other workers
// take the permit over and over (hold 100 ms each).
//
// A hand-off takes its receiver out of the waits hash as well as the
// list, so the resumed waiter's next attempt queues it again (before, the
// waits hash still named it, enqueue did not push it, and it got no
// permit while the workers ran).
func TestLivenessSharedLapsedWaiterQueuesAgain(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	key := "sh-lapsed-" + randKey()
	holder := locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(holderLease))
	_, hunlock, err := holder.Acquire(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := locktest.StartChild(t, sharedChildEnv("wait-p", srv.Addr, key, 1, 30*time.Second, 1), "queued")
	t.Cleanup(func() { _ = w.Process.Signal(syscall.SIGCONT) })
	waitSubscribed(t, rdb, key, 1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var rounds [3]int
	for i := range 3 {
		c := locktest.NewClient(t, srv.Client(t))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, u, err := c.Acquire(ctx, key, 1, lock.WithMaxWait(3*time.Second))
				if err != nil {
					continue
				}
				rounds[i]++
				time.Sleep(100 * time.Millisecond)
				_ = u()
			}
		}()
	}
	waitQueued(t, rdb, key, 4)
	if err := w.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := hunlock(); err != nil { // hands the permit to the frozen waiter
		t.Fatal(err)
	}
	time.Sleep(claimWindowShared + 500*time.Millisecond)
	if err := w.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	ev, err := rdb.BLPop(ctx, 8*time.Second, sharedEvents(key)).Result()
	d := time.Since(resumed) // the resumed waiter then holds for good: the workers wait until their limit
	close(stop)
	wg.Wait()
	t.Logf("workers' rounds %v", rounds)
	if err != nil {
		ev, err = rdb.BLPop(ctx, 10*time.Second, sharedEvents(key)).Result()
		t.Errorf("the resumed waiter got no permit in 8 s while 3 workers took it %d times; once they stopped: %v (%v) %v after the resume",
			rounds[0]+rounds[1]+rounds[2], ev, err, time.Since(resumed).Round(time.Millisecond))
		return
	}
	t.Logf("the resumed waiter: %v %v after the resume", ev, d.Round(time.Millisecond))
	if ev[1] != "got <nil>" {
		t.Errorf("the resumed waiter: %s", ev[1])
	}
	if d > lapsedBound {
		t.Errorf("the resumed waiter got in %v after the resume, while 3 workers took the permit %d times; want within %v",
			d.Round(time.Millisecond), rounds[0]+rounds[1]+rounds[2], lapsedBound)
	}
}
