package leader_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
)

// TestCancelWhileTheLockIsHandedOverLeavesNoGap: when the leader resigns
// at the moment the first waiter's context ends (the hand-over racing the
// cancellation, at offsets from -1 to +1 ms), the waiter's Run returns at
// once and the next waiter leads within 1 s, not after the 5 s lease a
// lock handed to the departed waiter would keep; one lead at a time.
func TestCancelWhileTheLockIsHandedOverLeavesNoGap(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 3)
	const lease = 5 * time.Second
	for round, offset := range []time.Duration{-time.Millisecond, -200 * time.Microsecond, 0, 0, 0, 200 * time.Microsecond, time.Millisecond} {
		name := fmt.Sprintf("race%d", round)
		tr := newTracker()
		resign := make(chan struct{})
		actx, stopA := context.WithCancel(context.Background())
		bctx, stopB := context.WithCancel(context.Background())
		cctx, stopC := context.WithCancel(context.Background())
		t.Cleanup(func() { stopA(); stopB(); stopC() }) // before the Clients close, should a round fail
		ran := make([]chan error, 3)
		run := func(i int, ctx context.Context, until func(context.Context) error) {
			ran[i] = make(chan error, 1)
			go func() { ran[i] <- leader.Run(ctx, cs[i], name, tr.lead(t, i, name, until), leader.WithLease(lease)) }()
		}
		queued := func(n int) {
			locktest.Eventually(t, locktest.Bound(2*time.Second), fmt.Sprintf("%d waiters queued", n), func() bool {
				info, err := cs[0].Inspect(context.Background(), leader.Key(name))
				return err == nil && len(info.Waiters) == n
			})
		}
		run(0, actx, func(lctx context.Context) error {
			select {
			case <-resign:
			case <-lctx.Done():
			}
			stopA()
			return nil
		})
		if who := tr.next(t, locktest.Bound(2*time.Second)); who != 0 {
			t.Fatalf("round %d: replica %d led first", round, who)
		}
		run(1, bctx, nil)
		queued(1)
		run(2, cctx, nil)
		queued(2)
		first, second := func() { close(resign) }, stopB
		if offset < 0 {
			first, second, offset = second, first, -offset
		}
		first()
		if offset > 0 {
			for start := time.Now(); time.Since(start) < offset; { // finer than a timer
			}
		}
		second()
		cancelled := time.Now()
		select {
		case err := <-ran[1]:
			if err != context.Canceled {
				t.Errorf("round %d: the cancelled waiter's Run: %v", round, err)
			}
		case <-time.After(locktest.Bound(2 * time.Second)):
			t.Fatalf("round %d: the cancelled waiter's Run goes on %v after its context ended", round, locktest.Bound(2*time.Second))
		}
		if took := time.Since(cancelled); took > locktest.Bound(200*time.Millisecond) {
			t.Errorf("round %d: the cancelled waiter's Run returned %v after its context ended", round, took)
		}
		for {
			who := tr.next(t, locktest.Bound(time.Second))
			if who == 2 {
				break
			}
			if who != 1 {
				t.Fatalf("round %d: replica %d led again", round, who)
			}
		}
		stopC()
		for _, i := range []int{0, 2} {
			select {
			case err := <-ran[i]:
				if err != context.Canceled {
					t.Errorf("round %d: replica %d's Run: %v", round, i, err)
				}
			case <-time.After(locktest.Bound(2 * time.Second)):
				t.Fatalf("round %d: replica %d's Run goes on %v after its context ended", round, i, locktest.Bound(2*time.Second))
			}
		}
		terms, most := tr.snapshot()
		checkTerms(t, terms, most)
		for _, tm := range terms {
			if tm.who == 1 && tm.ctx.Err() == nil {
				t.Errorf("round %d: the cancelled waiter's lead context is live", round)
			}
		}
	}
}
