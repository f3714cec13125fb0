package lock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// acquiredMark is an Observer that notes, under its mutex, that a Lock
// obtained its key and is about to return: a cancellation made under the
// same mutex before the note came strictly before Lock's last look at its
// context.
type acquiredMark struct {
	recorder
	acquired bool
}

func (m *acquiredMark) AcquireEnded(ctx context.Context, a lock.Acquire, held context.Context) context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acquires = append(m.acquires, a)
	m.acquired = m.acquired || a.Outcome == lock.OutcomeAcquired
	return held
}

// cancel calls cancel and reports whether it came before the note.
func (m *acquiredMark) cancel(cancel context.CancelFunc) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	cancel()
	return !m.acquired
}

func (m *acquiredMark) reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.acquired = false
}

// A waiter whose context is cancelled around the moment the key is handed
// to it either obtains the key with a live lock context, or fails and
// passes the key on at once: never a success whose context is already
// done, which the caller would take for a lock it holds while it is about
// to stop, nor a key left blocked for the next waiter. Each round: B
// holds, A and then C wait; A's context is cancelled at a random moment
// from 1 ms before to 2 ms after B's unlock starts. A success whose
// context is done is allowed only when the cancellation came after Lock
// had obtained the key and reported it (the caller's business, as a
// cancellation just after Lock returned would be).
func TestCancelledWaiterNeverSucceedsDone(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	mark := &acquiredMark{}
	a := locktest.NewClient(t, rdb, lock.WithObserver(mark))
	b := locktest.NewClient(t, rdb)
	c := locktest.NewClient(t, rdb)
	rounds := 600
	if testing.Short() {
		rounds = 100
	}
	var doneSuccess, failures int
	for i := range rounds {
		key := "cancel-handoff-" + randKey()
		_, unlockB := locktest.MustLock(t, b, context.Background(), key)
		actx, cancelA := context.WithCancel(context.Background())
		mark.reset()
		var cancelledFirst atomic.Bool // A was cancelled before Lock obtained the key
		aDone := make(chan struct{})
		var aRes lockResult
		var doneAtReturn bool
		go func() {
			defer close(aDone)
			aRes.ctx, aRes.unlock, aRes.err = a.Lock(actx, key)
			doneAtReturn = aRes.err == nil && aRes.ctx.Err() != nil // at once: a later cancel is the caller's business
		}()
		waitQueued(t, rdb, key, 1)
		cDone, cRes := lockAsync(c, context.Background(), key)
		waitQueued(t, rdb, key, 2)
		waitSubscribed(t, rdb, key, 2)

		offset := time.Duration(rand.IntN(3000)-1000) * time.Microsecond
		if offset < 0 {
			cancelledFirst.Store(mark.cancel(cancelA))
			time.Sleep(-offset)
		} else {
			go func() {
				time.Sleep(offset)
				cancelledFirst.Store(mark.cancel(cancelA))
			}()
		}
		if err := unlockB(); err != nil {
			t.Fatalf("round %d: B's unlock: %v", i, err)
		}
		locktest.Within(t, aDone, 2*time.Second, "A's Lock")
		switch {
		case aRes.err == nil:
			if doneAtReturn && cancelledFirst.Load() {
				doneSuccess++
			}
			_ = aRes.unlock()
		case !errors.Is(aRes.err, lock.ErrNotObtained) || !errors.Is(aRes.err, context.Canceled):
			t.Fatalf("round %d: A's Lock = %v, want ErrNotObtained and context.Canceled", i, aRes.err)
		default:
			failures++
		}
		// Whatever A got, C, next in line, gets the key at once.
		locktest.Within(t, cDone, 500*time.Millisecond, "C's Lock after A's turn")
		if cRes.err != nil {
			t.Fatalf("round %d: C's Lock = %v", i, cRes.err)
		}
		if err := cRes.unlock(); err != nil {
			t.Fatalf("round %d: C's unlock: %v", i, err)
		}
		cancelA()
	}
	t.Logf("%d rounds: %d failures, %d successes with a context cancelled before it obtained the key", rounds, failures, doneSuccess)
	if doneSuccess > 0 {
		t.Errorf("%d of %d rounds: Lock succeeded with a lock context that was cancelled before it obtained the key", doneSuccess, rounds)
	}
	mark.mu.Lock()
	defer mark.mu.Unlock()
	acquired := 0
	for _, a := range mark.acquires {
		if a.Outcome == lock.OutcomeAcquired {
			acquired++
		}
	}
	if acquired != len(mark.releases) {
		t.Errorf("observer: %d acquisitions, %d releases; want one release for each", acquired, len(mark.releases))
	}
}
