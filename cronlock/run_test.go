package cronlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestOncePerTick fires one job on two replicas for two ticks: each tick
// runs once, on the replica that fired first.
func TestOncePerTick(t *testing.T) {
	t.Parallel()
	srv, rdb := locktest.NewRedis(t)
	clk := newFakeClock(tick0.Add(10 * time.Millisecond))
	a, b := newLocalReplica(t, rdb, nil, cronlock.WithClock(clk.now)), newLocalReplica(t, rdb, nil, cronlock.WithClock(clk.now))
	name := uniqueName()
	idA, idB := a.add(t, name, nop), b.add(t, name, nop)

	fire(a.c, idA)
	fire(b.c, idB)
	first, other := a.rec.only(t), b.rec.only(t)
	if first.Outcome != cronlock.OutcomeRan || other.Outcome != cronlock.OutcomeSkippedTickDone {
		t.Fatalf("tick 0: first replica %s, second %s; want ran, skipped-tick-done", first.Outcome, other.Outcome)
	}
	if !first.Tick.Equal(tick0) || !other.Tick.Equal(tick0) {
		t.Fatalf("ticks %v and %v, want %v", first.Tick, other.Tick, tick0)
	}
	// The marker is kept 7/8 of the period after the tick, then released
	// (its lease would lapse 74 ms later, inside the bound).
	outlive(t, srv, tickKey(name))
	if d := waitFree(t, a.locker, tickKey(name)); d < 700*time.Millisecond || d > 2*time.Second {
		t.Fatalf("tick marker released %v later, want about 865 ms", d)
	}

	clk.set(tick0.Add(time.Second + 10*time.Millisecond))
	fire(b.c, idB)
	fire(a.c, idA)
	second, skipped := b.rec.all()[1], a.rec.all()[1]
	if second.Outcome != cronlock.OutcomeRan || skipped.Outcome != cronlock.OutcomeSkippedTickDone {
		t.Fatalf("tick 1: first replica %s, second %s; want ran, skipped-tick-done", second.Outcome, skipped.Outcome)
	}
	if second.Token <= first.Token {
		t.Fatalf("fencing token %d after %d, want larger", second.Token, first.Token)
	}
}

// TestHolderLetsGoAtNextTick fires the next tick before the previous
// tick's marker is due to be released by its timer (the clock jumps): a
// replica whose clock is ahead of the holder's skips, and the holder lets
// go of its marker and runs the tick.
func TestHolderLetsGoAtNextTick(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	minute := time.Date(2030, 1, 2, 3, 4, 0, 0, time.UTC)
	clk := newFakeClock(minute.Add(10 * time.Millisecond))
	a, b := newLocalReplica(t, rdb, nil, cronlock.WithClock(clk.now)), newLocalReplica(t, rdb, nil, cronlock.WithClock(clk.now))
	name := uniqueName()
	idA := mustAdd(t, a.s, "@every 10s", name, nop) // the marker is kept 2 s
	idB := mustAdd(t, b.s, "@every 10s", name, nop)
	fire(a.c, idA)

	clk.set(minute.Add(10*time.Second + 10*time.Millisecond))
	fire(b.c, idB)
	fire(a.c, idA)
	if got := b.rec.only(t); got.Outcome != cronlock.OutcomeSkippedTickDone {
		t.Fatalf("replica b at the second tick: %s, want skipped-tick-done", got.Outcome)
	}
	all := a.rec.all()
	if len(all) != 2 {
		t.Fatalf("replica a: %d attempts, want 2", len(all))
	}
	for i, got := range all {
		if want := minute.Add(time.Duration(i) * 10 * time.Second); got.Outcome != cronlock.OutcomeRan || !got.Tick.Equal(want) {
			t.Fatalf("replica a, attempt %d: %s for %v, want ran for %v", i, got.Outcome, got.Tick, want)
		}
	}
}

// TestSkippedHeld lets a run outlast its period: the next tick, taken by
// another replica, is skipped there and runs nowhere else.
func TestSkippedHeld(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	clk := newFakeClock(tick0)
	a, b := newLocalReplica(t, rdb, nil, cronlock.WithClock(clk.now)), newLocalReplica(t, rdb, nil, cronlock.WithClock(clk.now))
	name := uniqueName()
	started, finish := make(chan struct{}), make(chan struct{})
	slow := func(context.Context) error {
		close(started)
		<-finish
		return nil
	}
	idA, idB := a.add(t, name, slow), b.add(t, name, slow)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fire(a.c, idA)
	}()
	<-started
	waitFree(t, b.locker, tickKey(name))

	clk.set(tick0.Add(time.Second))
	fire(b.c, idB)
	fire(a.c, idA) // the same replica as the run, at the next tick
	if got := b.rec.only(t); got.Outcome != cronlock.OutcomeSkippedHeld || !got.Tick.Equal(tick0.Add(time.Second)) {
		t.Fatalf("replica b at tick 1: %+v, want skipped-held", got)
	}
	if got := a.rec.only(t); got.Outcome != cronlock.OutcomeSkippedTickDone {
		t.Fatalf("replica a at tick 1: %+v, want skipped-tick-done", got)
	}
	close(finish)
	<-done
	if got := a.rec.all()[1]; got.Outcome != cronlock.OutcomeRan || !got.Tick.Equal(tick0) {
		t.Fatalf("replica a's run: %+v, want ran for tick 0", got)
	}
}

// TestRunContext checks what a job's context carries during and after the
// run.
func TestRunContext(t *testing.T) {
	t.Parallel()
	r := newLocalReplica(t, newRedis(t), nil, cronlock.WithClock(newFakeClock(tick0).now))
	name := uniqueName()
	var runCtx context.Context
	var token uint64
	var tick time.Time
	var ok1, ok2, held bool
	fire(r.c, r.add(t, name, func(ctx context.Context) error {
		runCtx = ctx
		token, ok1 = cronlock.FencingToken(ctx)
		tick, ok2 = cronlock.Tick(ctx)
		held = lock.Held(ctx, runKey(name))
		return nil
	}))
	a := r.rec.only(t)
	if !ok1 || !ok2 || !held || token != a.Token || token == 0 || !tick.Equal(tick0) {
		t.Fatalf("in the run: token %d %v (attempt's %d), tick %v %v, held %v", token, ok1, a.Token, tick, ok2, held)
	}
	if runCtx.Err() == nil {
		t.Fatal("run context not cancelled after the run")
	}
	if _, ok := cronlock.FencingToken(runCtx); ok {
		t.Fatal("FencingToken ok after the run")
	}
	if _, ok := cronlock.Tick(context.Background()); ok {
		t.Fatal("Tick ok for a context that is no run's")
	}
	if _, ok := cronlock.FencingToken(context.Background()); ok {
		t.Fatal("FencingToken ok for a context that is no run's")
	}
}

var errBoom = errors.New("boom")

// TestFailedRuns checks that an error or a panic makes a failed run whose
// lock is released.
func TestFailedRuns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		fn    func(context.Context) error
		isErr error
		text  string
	}{
		{"error", func(context.Context) error { return errBoom }, errBoom, "boom"},
		{"panic", func(context.Context) error { panic("kaput") }, cronlock.ErrPanicked, "cronlock: job panicked: kaput\ngoroutine"},
	}
	rdb := newRedis(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now))
			name := uniqueName()
			fire(r.c, r.add(t, name, tt.fn))
			a := r.rec.only(t)
			if a.Outcome != cronlock.OutcomeFailed || !errors.Is(a.Err, tt.isErr) || !strings.Contains(a.Err.Error(), tt.text) {
				t.Fatalf("attempt: %s, %v; want failed, %v", a.Outcome, a.Err, tt.isErr)
			}
			_, unlock, err := r.locker.TryLock(context.Background(), runKey(name))
			if err != nil {
				t.Fatalf("run lock after a failed run: %v", err)
			}
			_ = unlock()
		})
	}
}

// TestLostRun takes the run lock away during a run: the job's context is
// cancelled with the cause, and the attempt is reported lost.
func TestLostRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		take  func(r *replica, rdb *redis.Client, name string)
		cause error
	}{
		{"lock key deleted", func(_ *replica, rdb *redis.Client, name string) {
			rdb.Del(context.Background(), redisKey(runKey(name)))
		}, lock.ErrLost},
		{"locker closed", func(r *replica, _ *redis.Client, _ string) { _ = r.locker.Close() }, lock.ErrClosed},
	}
	rdb := newRedis(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A 300 ms lease is renewed every 100 ms: a deleted key is seen soon.
			r := newLocalReplica(t, rdb, []lock.Option{lock.WithDefaultLease(300 * time.Millisecond)},
				cronlock.WithClock(newFakeClock(tick0).now))
			name := uniqueName()
			started := make(chan struct{})
			id := r.add(t, name, func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				return ctx.Err()
			})
			go func() {
				<-started
				tt.take(r, rdb, name)
			}()
			fire(r.c, id)
			a := r.rec.only(t)
			if a.Outcome != cronlock.OutcomeLost || !errors.Is(a.Err, tt.cause) || !errors.Is(a.Err, context.Canceled) {
				t.Fatalf("attempt: %s, %v; want lost, %v", a.Outcome, a.Err, tt.cause)
			}
		})
	}
}

// TestRedisDown checks that an attempt that cannot reach Redis is a failed
// one, carrying the Redis error, not a skipped one.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	r := newLocalReplica(t, rdb, nil, cronlock.WithClock(newFakeClock(tick0).now))
	id := r.add(t, uniqueName(), nop)
	srv.Stop()
	fire(r.c, id)
	a := r.rec.only(t)
	if a.Outcome != cronlock.OutcomeFailed || a.Err == nil || errors.Is(a.Err, lock.ErrNotObtained) {
		t.Fatalf("attempt: %s, %v; want failed with a Redis error", a.Outcome, a.Err)
	}
}

// Job names are global per Redis and key prefix: two services whose
// Lockers share a Redis with the same prefix and both name a job "cleanup"
// run it as one job; with a prefix each (lock.WithPrefix), each runs its
// own.
func TestPrefixesIsolateServices(t *testing.T) {
	t.Parallel()
	rdb := newRedis(t)
	clock := cronlock.WithClock(newFakeClock(tick0).now)
	for _, tc := range []struct {
		prefixes [2]string
		ran      int
	}{
		{[2]string{"billing", "search"}, 2},
		{[2]string{lock.DefaultPrefix, lock.DefaultPrefix}, 1},
	} {
		ran := 0
		for _, p := range tc.prefixes {
			r := newLocalReplica(t, rdb, []lock.Option{lock.WithPrefix(p)}, clock)
			fire(r.c, r.add(t, "cleanup-"+tc.prefixes[0], nop))
			if r.rec.only(t).Outcome == cronlock.OutcomeRan {
				ran++
			}
		}
		if ran != tc.ran {
			t.Errorf("prefixes %q: the tick ran %d times, want %d", tc.prefixes, ran, tc.ran)
		}
	}
}
