package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestRunReturnsByDeadlineWithRedisStalled: with Redis SIGSTOPped, Run
// returns its context's error within the deadline + 100 ms: on the
// leader (whose resignation Redis does not answer), on the replica
// waiting for the lock, and on one that started campaigning once Redis
// was stalled.
func TestRunReturnsByDeadlineWithRedisStalled(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	slack := locktest.Bound(100 * time.Millisecond)
	deadline := time.Now().Add(locktest.Bound(500 * time.Millisecond))
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	tr := newTracker()
	type ret struct {
		err error
		at  time.Time
	}
	rets := make(chan ret, 3)
	for i, c := range cs {
		go func() {
			err := leader.Run(ctx, c, "deadline", tr.lead(t, i, "deadline", nil), leader.WithLease(10*time.Second))
			rets <- ret{err, time.Now()}
		}()
	}
	tr.next(t, time.Until(deadline))
	time.Sleep(50 * time.Millisecond) // the other replica queues
	r.Pause()
	defer r.Resume()
	if time.Now().After(deadline) {
		t.Fatal("Redis stalled after the deadline: the machine is too slow for this test")
	}
	late := replicas(t, r, 1)[0] // campaigns on a Redis stalled already
	go func() {
		err := leader.Run(ctx, late, "deadline", tr.lead(t, 2, "deadline", nil), leader.WithLease(10*time.Second))
		rets <- ret{err, time.Now()}
	}()
	for range 3 {
		rt := <-rets
		if rt.err != context.DeadlineExceeded {
			t.Errorf("Run: %v, want context.DeadlineExceeded", rt.err)
		}
		if late := rt.at.Sub(deadline); late > slack {
			t.Errorf("Run returned %v after its deadline, want within %v", late, slack)
		} else {
			t.Logf("Run returned %v after its deadline", late)
		}
	}
}

// TestRunReturnsAfterCancelWithRedisStalled: a Run cancelled (no
// deadline) while it leads with Redis stalled waits for its resignation
// 1 s at most, as lock.UnlockFunc does, then returns.
func TestRunReturnsAfterCancelWithRedisStalled(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr := newTracker()
	ran := make(chan error, 1)
	go func() {
		ran <- leader.Run(ctx, c, "cancel", tr.lead(t, 0, "cancel", nil), leader.WithLease(10*time.Second))
	}()
	tr.next(t, locktest.Bound(2*time.Second))
	r.Pause()
	defer r.Resume()
	start := time.Now()
	cancel()
	limit := time.Second + locktest.Bound(100*time.Millisecond)
	select {
	case err := <-ran:
		if err != context.Canceled {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
		t.Logf("Run returned %v after its context was cancelled", time.Since(start))
	case <-time.After(limit):
		t.Fatalf("Run goes on %v after its context was cancelled with Redis stalled", limit)
	}
}

// TestRunReturnsByDeadlineOnAHalfOpenConnection: a leader whose
// connections go half-open (nothing forwarded, nothing closed: only a
// timeout tells it) returns its context's error within the deadline +
// 100 ms, whether the deadline comes while it leads (lease 10 s) or after
// it lost its term (lease 1 s), as does a replica that campaigns on the
// half-open connections.
func TestRunReturnsByDeadlineOnAHalfOpenConnection(t *testing.T) {
	locktest.Timed(t)
	for _, tc := range []struct {
		name  string
		lease time.Duration
		lost  bool // the leader lost its term before the deadline
	}{
		{"leading", 10 * time.Second, false},
		{"lost", time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newRedis(t)
			proxy := locktest.StartProxy(t, r.Addr)
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
			cs := []*lock.Client{locktest.NewClient(t, rdb), locktest.NewClient(t, rdb)}
			deadline := time.Now().Add(locktest.Bound(500 * time.Millisecond))
			if tc.lost {
				deadline = deadline.Add(2 * tc.lease)
			}
			ctx, cancel := context.WithDeadline(context.Background(), deadline)
			defer cancel()
			tr := newTracker()
			type ret struct {
				err error
				at  time.Time
			}
			rets := make(chan ret, 2)
			run := func(i int) {
				go func() {
					err := leader.Run(ctx, cs[i], "halfopen", tr.lead(t, i, "halfopen", nil), leader.WithLease(tc.lease))
					rets <- ret{err, time.Now()}
				}()
			}
			run(0)
			tr.next(t, time.Until(deadline))
			proxy.Freeze()
			defer proxy.Thaw(0)
			if time.Now().After(deadline) {
				t.Fatal("cut after the deadline: the machine is too slow for this test")
			}
			run(1)
			slack := locktest.Bound(100 * time.Millisecond)
			for range 2 {
				select {
				case rt := <-rets:
					if rt.err != context.DeadlineExceeded {
						t.Errorf("Run: %v, want context.DeadlineExceeded", rt.err)
					}
					if late := rt.at.Sub(deadline); late > slack {
						t.Errorf("Run returned %v after its deadline, want within %v", late, slack)
					} else {
						t.Logf("Run returned %v after its deadline", late)
					}
				case <-time.After(time.Until(deadline) + 2*time.Second):
					t.Fatalf("Run goes on 2 s after its deadline on a half-open connection")
				}
			}
			terms, _ := tr.snapshot()
			if lost := errors.Is(terms[0].cause, lock.ErrLost) && terms[0].end.Before(deadline); lost != tc.lost {
				t.Errorf("the leader's term ended with %v at %v before the deadline, want lost before it: %v", terms[0].cause, deadline.Sub(terms[0].end), tc.lost)
			}
		})
	}
}
