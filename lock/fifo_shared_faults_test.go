package lock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Fairness of the read-write lock (issue 33): a writer in the queue holds
// up later readers, so a steady stream of readers does not starve it;
// readers queued behind a writer go in together when it leaves, and those
// behind a second writer wait for it.

// Writers not starved: four readers of three Clients take the key over and
// over, overlapping, each holding 200 ms. A writer that queues must get in
// within one reader hold time after it queued (the readers ahead of it
// leave within that), plus slack, and no reader that came after it may get
// in before it.
func TestFIFOWriterGetsInAheadOfLaterReaders(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	var clients []*lock.Client
	for range 3 {
		clients = append(clients, locktest.NewClient(t, srv.Client(t)))
	}
	key := "sh-starve-" + randKey()
	const hold = 200 * time.Millisecond
	var writerIn atomic.Bool
	var queuedAt atomic.Int64 // when the writer queued, unix ns; 0 before
	var late atomic.Int64     // readers whose call began after the writer queued and got in before it
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[r%3]
			time.Sleep(time.Duration(r) * hold / 4) // staggered: some reader holds at any time
			for {
				select {
				case <-stop:
					return
				default:
				}
				began := time.Now().UnixNano()
				_, unlock, err := c.RLock(context.Background(), key, lock.WithMaxWait(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if q := queuedAt.Load(); q != 0 && began > q && !writerIn.Load() {
					late.Add(1)
				}
				time.Sleep(hold)
				_ = unlock()
			}
		}()
	}
	time.Sleep(3 * hold)
	w := locktest.NewClient(t, srv.Client(t))
	done, res := lockAsync(w, context.Background(), key, lock.WithMaxWait(20*time.Second))
	// Readers queue behind the writer at once, and on a busy machine the
	// writer may find a gap and get in without queuing.
	locktest.Eventually(t, 5*time.Second, "the writer queued or in", func() bool {
		select {
		case <-done:
			return true
		default:
		}
		return queueLen(t, rdb, key) >= 1
	})
	queued := time.Now()
	queuedAt.Store(queued.UnixNano())
	locktest.Within(t, done, 20*time.Second, "the writer")
	writerIn.Store(true)
	close(stop)
	if res.err != nil {
		t.Fatal(res.err)
	}
	_ = res.unlock()
	wg.Wait()
	d := res.at.Sub(queued)
	t.Logf("the writer got in %v after it queued among readers holding %v each", d, hold)
	if limit := hold + locktest.Bound(300*time.Millisecond); d > limit {
		t.Errorf("the writer got in %v after it queued, want within one reader hold (%v) plus slack: %v", d, hold, limit)
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d readers that came after the queued writer got in before it", n)
	}
}

// Readers behind a writer go in together: W1 holds; R1 and R2 (two
// Clients), W2 and R3 queue in that order. W1's unlock lets R1 and R2 in
// together (within slack of each other), not R3; their unlocks let W2 in;
// W2's lets R3 in.
func TestFIFOReadersOfTwoClientsBehindWriterGoInTogether(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	c := locktest.NewClient(t, srv.Client(t))
	key := "sh-together-" + randKey()
	_, w1unlock := locktest.MustLock(t, a, ctx, key)
	type res struct {
		at     time.Time
		unlock lock.UnlockFunc
		err    error
	}
	start := func(c *lock.Client, read bool, n int64) chan res {
		ch := make(chan res, 1)
		go func() {
			var r res
			if read {
				_, r.unlock, r.err = c.RLock(ctx, key, lock.WithMaxWait(20*time.Second))
			} else {
				_, r.unlock, r.err = c.Lock(ctx, key, lock.WithMaxWait(20*time.Second))
			}
			r.at = time.Now()
			ch <- r
		}()
		waitQueued(t, rdb, key, n)
		return ch
	}
	r1 := start(b, true, 1)
	r2 := start(c, true, 2)
	w2 := start(b, false, 3)
	r3 := start(c, true, 4)
	get := func(ch chan res, what string) res {
		t.Helper()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatalf("%s: %v", what, r.err)
			}
			return r
		case <-time.After(locktest.Bound(5 * time.Second)):
			t.Fatalf("%s: not in within %v", what, locktest.Bound(5*time.Second))
		}
		return res{}
	}
	notYet := func(ch chan res, what string) {
		t.Helper()
		select {
		case r := <-ch:
			t.Fatalf("%s got in out of turn (err %v)", what, r.err)
		case <-time.After(300 * time.Millisecond):
		}
	}
	if err := w1unlock(); err != nil {
		t.Fatal(err)
	}
	g1, g2 := get(r1, "R1"), get(r2, "R2")
	spread := g1.at.Sub(g2.at).Abs()
	t.Logf("R1 and R2 got in %v apart", spread)
	if spread > locktest.Bound(200*time.Millisecond) {
		t.Errorf("R1 and R2 got in %v apart, want together", spread)
	}
	notYet(w2, "W2 while readers hold")
	notYet(r3, "R3 behind the queued W2")
	_ = g1.unlock()
	notYet(w2, "W2 while R2 holds")
	_ = g2.unlock()
	gw := get(w2, "W2")
	notYet(r3, "R3 while W2 holds")
	_ = gw.unlock()
	g3 := get(r3, "R3")
	_ = g3.unlock()
}

// Readers of one Client queued behind a writer go in together too: five
// RLock calls of one Client wait while a writer of another holds; its
// unlock lets all five in within slack of each other (each told by its
// own message on the Client's one channel).
func TestFIFOReadersOfOneClientGoInTogether(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t))
	b := locktest.NewClient(t, srv.Client(t))
	key := "sh-together1-" + randKey()
	_, wunlock := locktest.MustLock(t, a, ctx, key)
	const n = 5
	ats := make(chan time.Time, n)
	for i := range n {
		go func() {
			_, u, err := b.RLock(ctx, key, lock.WithMaxWait(20*time.Second))
			if err != nil {
				t.Error(err)
				ats <- time.Time{}
				return
			}
			ats <- time.Now()
			time.Sleep(300 * time.Millisecond)
			_ = u()
		}()
		waitQueued(t, rdb, key, int64(i+1))
	}
	released := time.Now()
	if err := wunlock(); err != nil {
		t.Fatal(err)
	}
	var last time.Time
	for range n {
		select {
		case at := <-ats:
			if at.IsZero() {
				t.FailNow()
			}
			if at.After(last) {
				last = at
			}
		case <-time.After(locktest.Bound(5 * time.Second)):
			t.Fatalf("not every reader in within %v of the writer's unlock", locktest.Bound(5*time.Second))
		}
	}
	d := last.Sub(released)
	t.Logf("the last of %d readers of one Client got in %v after the writer's unlock", n, d)
	if d > locktest.Bound(200*time.Millisecond) {
		t.Errorf("the last of %d readers of one Client got in %v after the writer's unlock, want together", n, d)
	}
}

// Permits go first come, first served across Clients: six waiters of
// three Clients queue one by one behind the holder of a semaphore of 1;
// each release hands the permit to the next in that order.
func TestFIFOPermitsFirstComeFirstServed(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	ctx := context.Background()
	var clients []*lock.Client
	for range 3 {
		clients = append(clients, locktest.NewClient(t, srv.Client(t)))
	}
	key := "sh-fifo-" + randKey()
	_, hu, err := clients[0].Acquire(ctx, key, 1)
	if err != nil {
		t.Fatal(err)
	}
	const n = 6
	order := make(chan int, n)
	for i := range n {
		go func() {
			_, u, err := clients[i%3].Acquire(ctx, key, 1, lock.WithMaxWait(20*time.Second))
			if err != nil {
				t.Error(err)
				order <- -1
				return
			}
			order <- i
			time.Sleep(20 * time.Millisecond)
			_ = u()
		}()
		waitQueued(t, rdb, key, int64(i+1))
	}
	_ = hu()
	for want := range n {
		select {
		case got := <-order:
			if got != want {
				t.Fatalf("waiter %d got the permit in turn %d", got, want)
			}
		case <-time.After(locktest.Bound(5 * time.Second)):
			t.Fatalf("turn %d not taken within %v", want, locktest.Bound(5*time.Second))
		}
	}
}
