package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestManyHoldersToldBeforeTakeover (guarantee 1 and 2: the holder's
// context is cancelled with ErrLost before Redis can hand the key to
// anyone else): one Client holds 200 keys with a 600 ms lease (drift
// allowance 60 ms, so a timer late on a loaded machine is not counted),
// another Client waits for each; Redis freezes for 1 s, longer than the
// lease. When a waiter obtains a key, the holder's lock context of that
// key must be done already, with cause ErrLost.
func TestManyHoldersToldBeforeTakeover(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	opts := []lock.Option{lock.WithDefaultLease(600 * time.Millisecond), lock.WithDrift(60 * time.Millisecond)}
	holder := locktest.NewClient(t, srv.Client(t), opts...)
	other := locktest.NewClient(t, srv.Client(t), opts...)
	ctx := context.Background()
	const n = 200
	held := make([]context.Context, n)
	keys := make([]string, n)
	for i := range n {
		keys[i] = "adv-many-" + randKey()
		held[i], _ = locktest.MustLock(t, holder, ctx, keys[i])
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var bad []string
	obtained := 0
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, unlock, err := other.Lock(ctx, keys[i], lock.WithMaxWait(5*time.Second))
			if err != nil {
				return
			}
			mu.Lock()
			obtained++
			if held[i].Err() == nil || !errors.Is(context.Cause(held[i]), lock.ErrLost) {
				bad = append(bad, keys[i]+": "+time.Now().Format("15:04:05.000")+", holder's cause "+errString(context.Cause(held[i])))
			}
			mu.Unlock()
			_ = unlock()
		}()
	}
	time.Sleep(300 * time.Millisecond) // the waiters queue
	srv.Pause()
	time.Sleep(time.Second)
	srv.Resume()
	wg.Wait()
	t.Logf("%d of %d keys taken over", obtained, n)
	for i, b := range bad {
		if i == 5 {
			t.Errorf("... %d in all", len(bad))
			break
		}
		t.Errorf("the waiter obtained the key while its holder's context was live: %s", b)
	}
	if obtained < n/2 {
		t.Errorf("only %d of %d keys taken over after the holders lost them", obtained, n)
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
