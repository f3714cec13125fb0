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

// pending is a call started with async, named for failures.
type pending struct {
	name string
	done <-chan struct{}
	*lockResult
}

// took waits for p's call to return and fails the test unless it took
// the key.
func took(t *testing.T, p *pending) {
	t.Helper()
	locktest.Within(t, p.done, 10*time.Second, p.name)
	if p.err != nil {
		t.Fatalf("%s: %v", p.name, p.err)
	}
}

func start(name string, f func() (context.Context, lock.UnlockFunc, error)) *pending {
	done, res := async(f)
	return &pending{name, done, res}
}

// returned reports whether p's call returned, failing the test if it
// failed.
func (p *pending) returned(t *testing.T) bool {
	t.Helper()
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("%s: %v", p.name, p.err)
		}
		return true
	default:
		return false
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
	var waiters []*pending
	for i := range 4 {
		c := clients[i%2]
		waiters = append(waiters, start(fmt.Sprintf("waiter %d", i+1), func() (context.Context, lock.UnlockFunc, error) {
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
		took(t, w)
		for _, later := range waiters[i+1:] {
			if later.returned(t) {
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
	var readers []*pending
	for i := range 3 {
		c := []*lock.Client{a, b}[i%2]
		readers = append(readers, start(fmt.Sprintf("reader %d", i+1), func() (context.Context, lock.UnlockFunc, error) {
			return c.RLock(ctx, key)
		}))
		waitQueued(t, rdb, key, int64(i+1))
	}
	writer := start("writer 2", func() (context.Context, lock.UnlockFunc, error) { return b.Lock(ctx, key) })
	waitQueued(t, rdb, key, 4)
	late := start("reader 4", func() (context.Context, lock.UnlockFunc, error) { return a.RLock(ctx, key) })
	waitQueued(t, rdb, key, 5)

	_ = wu()
	for _, r := range readers {
		took(t, r) // together: none is released before all hold
	}
	for _, r := range readers {
		if r.ctx.Err() != nil {
			t.Fatalf("%s lost its hold: %v", r.name, context.Cause(r.ctx))
		}
	}
	time.Sleep(200 * time.Millisecond) // room for a wrong hand-off to show
	if writer.returned(t) || late.returned(t) {
		t.Fatal("the writer or the reader behind it got in with readers holding")
	}
	for _, r := range readers {
		_ = r.unlock()
	}
	took(t, writer)
	time.Sleep(200 * time.Millisecond)
	if late.returned(t) {
		t.Fatal("a reader got in with the writer holding")
	}
	_ = writer.unlock()
	took(t, late)
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
