package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// FIFO for permits and read holds: waiters get room in arrival order
// across Clients; a queued writer holds up the readers after it, and the
// readers behind a writer go in together when it leaves.

// sharedCall is one Acquire, RLock or Lock started in the background.
type sharedCall struct {
	name   string
	done   chan struct{}
	ctx    context.Context
	unlock lock.UnlockFunc
	err    error
	at     time.Time
}

func startShared(name string, f func() (context.Context, lock.UnlockFunc, error)) *sharedCall {
	s := &sharedCall{name: name, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.ctx, s.unlock, s.err = f()
		s.at = time.Now()
	}()
	return s
}

// held reports whether s returned, failing the test if it failed.
func (s *sharedCall) held(t *testing.T) bool {
	t.Helper()
	select {
	case <-s.done:
		if s.err != nil {
			t.Fatalf("%s: %v", s.name, s.err)
		}
		return true
	default:
		return false
	}
}

func (s *sharedCall) wait(t *testing.T) {
	t.Helper()
	locktest.Within(t, s.done, 10*time.Second, s.name)
	if s.err != nil {
		t.Fatalf("%s: %v", s.name, s.err)
	}
}

func TestFIFOSemaphoreWaitersAcrossClients(t *testing.T) {
	srv, rdb := newReal(t)
	clients := []*lock.Client{locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))}
	key := "fifo-sem-" + randKey()
	ctx := context.Background()
	var holders []lock.UnlockFunc
	for range 2 {
		_, u, err := clients[0].Acquire(ctx, key, 2)
		if err != nil {
			t.Fatal(err)
		}
		holders = append(holders, u)
	}
	var waiters []*sharedCall
	for i := range 4 {
		c := clients[i%2]
		waiters = append(waiters, startShared(fmt.Sprintf("waiter %d", i+1), func() (context.Context, lock.UnlockFunc, error) {
			return c.Acquire(ctx, key, 2)
		}))
		waitQueued(t, rdb, key, int64(i+1))
	}
	// Each release hands its permit to the first waiter left.
	for i, w := range waiters {
		if i < 2 {
			_ = holders[i]()
		} else {
			_ = waiters[i-2].unlock()
		}
		w.wait(t)
		for _, later := range waiters[i+1:] {
			if later.held(t) {
				t.Fatalf("%s got a permit before %s", later.name, w.name)
			}
		}
	}
	for _, w := range waiters[2:] {
		_ = w.unlock()
	}
}

func TestFIFOQueuedWriterHoldsUpLaterReadersWhoGoInTogether(t *testing.T) {
	srv, rdb := newReal(t)
	a, b := locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))
	key := "fifo-rw-" + randKey()
	ctx := context.Background()
	_, wu, err := a.Lock(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Over a Lock's hash: the first reader turns the key into a
	// read-write lock whose writer is that Lock.
	var readers []*sharedCall
	for i := range 3 {
		c := []*lock.Client{a, b}[i%2]
		readers = append(readers, startShared(fmt.Sprintf("reader %d", i+1), func() (context.Context, lock.UnlockFunc, error) {
			return c.RLock(ctx, key)
		}))
		waitQueued(t, rdb, key, int64(i+1))
	}
	writer := startShared("writer 2", func() (context.Context, lock.UnlockFunc, error) { return b.Lock(ctx, key) })
	waitQueued(t, rdb, key, 4)
	late := startShared("reader 4", func() (context.Context, lock.UnlockFunc, error) { return a.RLock(ctx, key) })
	waitQueued(t, rdb, key, 5)

	_ = wu()
	for _, r := range readers {
		r.wait(t) // together: none is released before all hold
	}
	for _, r := range readers {
		if r.ctx.Err() != nil {
			t.Fatalf("%s lost its hold: %v", r.name, context.Cause(r.ctx))
		}
	}
	time.Sleep(200 * time.Millisecond) // room for a wrong hand-off to show
	if writer.held(t) || late.held(t) {
		t.Fatal("the writer or the reader behind it got in with readers holding")
	}
	for _, r := range readers {
		_ = r.unlock()
	}
	writer.wait(t)
	time.Sleep(200 * time.Millisecond)
	if late.held(t) {
		t.Fatal("a reader got in with the writer holding")
	}
	_ = writer.unlock()
	late.wait(t)
	_ = late.unlock()
}

// Writers do not starve: readers keep coming, each holding 300 ms, and
// a writer that queues gets the key once the readers ahead of it leave,
// within one reader hold time (plus the hand-off) of its call.
func TestFIFOWriterNotStarvedBySteadyReaders(t *testing.T) {
	srv, _ := newReal(t)
	a, b := locktest.NewClient(t, srv.Client(t)), locktest.NewClient(t, srv.Client(t))
	key := "starve-" + randKey()
	const hold = 300 * time.Millisecond
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		c := []*lock.Client{a, b}[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(g) * hold / 4) // overlapping holds: never a gap
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, u, err := c.RLock(context.Background(), key, lock.WithMaxWait(5*time.Second))
				if err != nil {
					continue
				}
				time.Sleep(hold)
				_ = u()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	time.Sleep(hold) // the readers are in
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, u, err := b.Lock(ctx, key)
	if err != nil {
		t.Fatalf("writer starved: %v after %v", err, time.Since(start))
	}
	waited := time.Since(start)
	_ = u()
	t.Logf("writer waited %v", waited)
	if bound := hold + time.Second; waited > bound { // a loaded machine's hand-off: generous
		t.Errorf("writer waited %v, more than one reader hold and a second (%v)", waited, bound)
	}
}
