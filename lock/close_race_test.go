package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Lock, TryLock and re-entries start while Close runs (Close cancels the
// calls under way from a registry). Every call returns within 1 s of
// Close; a hold that Close ended (or that its call obtained as Close ran)
// has cause ErrClosed, its unlock returns ErrClosed, and no key is left
// held by an owner nobody holds: another Client gets each within a claim
// window.
func TestCallsStartingDuringClose(t *testing.T) {
	locktest.Timed(t)
	srv, _ := newReal(t)
	other := locktest.NewClient(t, srv.Client(t))
	for iter := range 15 {
		c, err := lock.New(srv.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var mu sync.Mutex
		var keys []string
		for g := range 12 {
			key := fmt.Sprintf("close-race-%d-%d", iter, g)
			mu.Lock()
			keys = append(keys, key)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					var lctx context.Context
					var unlock lock.UnlockFunc
					var err error
					if g%3 == 0 {
						lctx, unlock, err = c.TryLock(context.Background(), key)
					} else {
						lctx, unlock, err = c.Lock(context.Background(), key)
					}
					if err != nil {
						if !errors.Is(err, lock.ErrClosed) && !errors.Is(err, lock.ErrNotObtained) {
							t.Errorf("Lock: %v", err)
						}
						return
					}
					if g%2 == 0 { // re-enter
						ictx, iunlock, err := c.Lock(lctx, key)
						if err == nil {
							if !lock.Held(ictx, key) && context.Cause(ictx) == nil {
								t.Errorf("re-entry neither held nor ended")
							}
							_ = iunlock()
						} else if !errors.Is(err, lock.ErrClosed) {
							t.Errorf("re-entry: %v", err)
						}
					}
					err = unlock()
					if errors.Is(err, lock.ErrClosed) {
						if cause := context.Cause(lctx); cause != lock.ErrClosed {
							t.Errorf("unlock said ErrClosed, cause %v", cause)
						}
						return
					}
					if err != nil && !errors.Is(err, lock.ErrNotHeld) {
						// a release cut off by Close is reported, not hidden
						t.Logf("unlock: %v", err)
					}
				}
			}()
		}
		close(start)
		time.Sleep(time.Duration(iter%5) * 3 * time.Millisecond)
		begun := time.Now()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begun); d > locktest.Bound(time.Second) {
			t.Errorf("Close took %v", d)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		locktest.Within(t, done, time.Second+locktest.Bound(100*time.Millisecond), "calls under way at Close")
		for _, key := range keys {
			var err error
			deadline := time.Now().Add(1500 * time.Millisecond)
			for {
				var unlock lock.UnlockFunc
				_, unlock, err = other.TryLock(context.Background(), key)
				if err == nil {
					_ = unlock()
					break
				}
				if time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err != nil {
				t.Fatalf("iteration %d: key %s still blocked 1.5 s after Close: %v", iter, key, err)
			}
		}
	}
}
