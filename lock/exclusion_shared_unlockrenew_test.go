package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Guarantee (UnlockFunc's doc; issue 33's shared holds as leases with the
// watchdog): unlocks race renewals (lease 300 ms, renewed every 100 ms,
// the hold 0-400 ms) without a wrong answer: an unlock that returns nil leaves
// its context's cause ErrNotHeld (never ErrLost), an unlock of a hold
// whose context ended with ErrLost returns ErrLost, and exclusion holds
// throughout (at most 2 permits; no reader with a writer). The drift
// allowance is 100 ms, so that a timer fired late on a loaded machine is
// not counted (as in TestExclusionSlowPubSubAndStallsLongerThanLease).
func TestExclusionSharedUnlockRacesRenewal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
		kinds string
	}{{"semaphore of 2", 2, "p"}, {"read-write", 0, "rrw"}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newReal(t)
			var clients []*lock.Client
			for range 2 {
				clients = append(clients, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(300*time.Millisecond), lock.WithDrift(100*time.Millisecond)))
			}
			key := "sh-unren-" + randKey()
			reg := newShareRegister(tc.limit)
			var mu sync.Mutex
			var bad []string
			var lost, ok int
			var wg sync.WaitGroup
			for w := range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := clients[w%2]
					for range 25 {
						kind := string(tc.kinds[rand.N(len(tc.kinds))])
						before := reg.endedToken()
						lctx, unlock, err := sharedCallLimit(c, context.Background(), kind, key, tc.limit, lock.WithMaxWait(5*time.Second))
						if err != nil {
							continue
						}
						reg.enter(lctx, key, kind, before)
						time.Sleep(time.Duration(rand.N(400)) * time.Millisecond)
						reg.leave(lctx, key)
						lostBefore := errors.Is(context.Cause(lctx), lock.ErrLost)
						err = unlock()
						cause := context.Cause(lctx)
						mu.Lock()
						switch {
						case err == nil && errors.Is(cause, lock.ErrLost):
							bad = append(bad, fmt.Sprintf("unlock nil, cause %v", cause))
						case err == nil:
							ok++
						case lostBefore && !errors.Is(err, lock.ErrLost):
							bad = append(bad, fmt.Sprintf("hold lost before its unlock, which returned %v", err))
						case errors.Is(err, lock.ErrLost):
							lost++
						default:
							bad = append(bad, fmt.Sprintf("unlock: %v (cause %v)", err, cause))
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			t.Logf("%d unlocks confirmed, %d of lost holds", ok, lost)
			for i, b := range bad {
				if i == 10 {
					break
				}
				t.Error(b)
			}
			reg.check(t)
			if ok < locktest.Least(60) {
				t.Errorf("only %d unlocks confirmed", ok)
			}
		})
	}
}

// sharedCallLimit is sharedCall with a semaphore's limit.
func sharedCallLimit(c *lock.Client, ctx context.Context, kind, key string, limit int, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	if kind == "p" {
		return c.Acquire(ctx, key, limit, opts...)
	}
	return sharedCall(c, ctx, kind, key, opts...)
}
