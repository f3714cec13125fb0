package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestCurrentNamesTheLeader: Current reads the leader's owner label and
// the fencing token of its term, and no leader before or after.
func TestCurrentNamesTheLeader(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	ctx := context.Background()
	if info, err := leader.Current(ctx, cs[1], "cur"); err != nil || info.Led {
		t.Fatalf("Current before any leader: %+v, %v", info, err)
	}
	lctx, cancel := context.WithCancel(ctx)
	leading := make(chan uint64, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- leader.Run(lctx, cs[0], "cur", func(ctx context.Context) error {
			tok, _ := lock.FencingToken(ctx, leader.Key("cur"))
			leading <- tok
			<-ctx.Done()
			return nil
		}, leader.WithLease(5*time.Second))
	}()
	tok := <-leading
	info, err := leader.Current(ctx, cs[1], "cur")
	if err != nil || !info.Led || info.Leader.Label != "r0" || info.Token != tok || info.Lease <= 0 || info.Lease > 5*time.Second {
		t.Errorf("Current while r0 leads with token %d: %+v, %v", tok, info, err)
	}
	cancel()
	<-ran
	if info, err := leader.Current(ctx, cs[1], "cur"); err != nil || info.Led {
		t.Errorf("Current after the leader resigned: %+v, %v", info, err)
	}
}

// observed reads infos from ch until want says it saw enough, failing t
// after limit.
func observed(t *testing.T, ch <-chan leader.Info, limit time.Duration, want func([]leader.Info) bool) []leader.Info {
	t.Helper()
	var got []leader.Info
	deadline := time.After(limit)
	for !want(got) {
		select {
		case info, ok := <-ch:
			if !ok {
				t.Fatalf("Observe's channel closed early, after %+v", got)
			}
			got = append(got, info)
		case <-deadline:
			t.Fatalf("Observe sent %+v within %v, not what the test waits for", got, limit)
		}
	}
	return got
}

// TestObserveSendsEachTermAndClosesAtContextEnd: Observe sends the first
// reading (no leader), then every change of term once, with its leader
// and token, and closes its channel when its context ends, leaving no
// goroutine behind.
func TestObserveSendsEachTermAndClosesAtContextEnd(t *testing.T) {
	if !locktest.OwnProcess(t) {
		return
	}
	t.Cleanup(func() { goleak.VerifyNone(t) }) // last: after the Clients and Redis stopped
	r, _ := newRedis(t)
	cs := replicas(t, r, 3)
	octx, stop := context.WithCancel(context.Background())
	ch := leader.Observe(octx, cs[2], "obs", 10*time.Millisecond)
	if got := observed(t, ch, locktest.Bound(time.Second), func(g []leader.Info) bool { return len(g) == 1 }); got[0].Led {
		t.Fatalf("first reading: %+v, want no leader", got[0])
	}
	// A receiver that falls behind gets the latest term only: this one
	// keeps up, while the test waits for the terms to start.
	kept := make(chan leader.Info, 64)
	go func() {
		defer close(kept)
		for info := range ch {
			kept <- info
		}
	}()
	// Two terms: r0 leads for 300 ms and returns, then r1 does until the end.
	ctx, cancel := context.WithCancel(context.Background())
	tokens := make(chan uint64, 2)
	lead := func(i int) func(context.Context) error {
		return func(ctx context.Context) error {
			tok, _ := lock.FencingToken(ctx, leader.Key("obs"))
			tokens <- tok
			if i == 0 {
				time.Sleep(300 * time.Millisecond)
				return nil
			}
			<-ctx.Done()
			return nil
		}
	}
	ran0 := runAll(t, ctx, []lock.Locker{cs[0]}, "obs", func(int) func(context.Context) error { return lead(0) }, leader.WithBackoff(time.Hour, time.Hour))
	first := <-tokens
	ran1 := runAll(t, ctx, []lock.Locker{cs[1]}, "obs", func(int) func(context.Context) error { return lead(1) })
	second := <-tokens
	got := observed(t, kept, locktest.Bound(2*time.Second), func(g []leader.Info) bool {
		return len(g) > 0 && g[len(g)-1].Token == second
	})
	var seen []uint64
	for i, info := range got {
		if i > 0 && info == got[i-1] {
			t.Errorf("Observe sent %+v twice in a row", info)
		}
		if info.Led {
			seen = append(seen, info.Token)
			if want := map[uint64]string{first: "r0", second: "r1"}[info.Token]; info.Leader.Label != want {
				t.Errorf("term with token %d: leader %q, want %q", info.Token, info.Leader.Label, want)
			}
		}
	}
	if len(seen) != 2 || seen[0] != first || seen[1] != second {
		t.Errorf("terms observed %v, want tokens %d then %d (all sent: %+v)", seen, first, second, got)
	}
	cancel()
	<-ran0
	<-ran1
	stop()
	closed := make(chan struct{})
	go func() {
		for range kept {
		}
		close(closed)
	}()
	locktest.Within(t, closed, locktest.Bound(100*time.Millisecond), "Observe's channel closed after its context ended")
}

// TestObserveWithRedisStalledClosesAtContextEnd: a stalled Redis neither
// blocks Observe's channel from closing at its context's end, nor makes
// it send a term it did not read.
func TestObserveWithRedisStalledClosesAtContextEnd(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	ch := leader.Observe(ctx, c, "stall", 20*time.Millisecond)
	if info := <-ch; info.Led {
		t.Fatalf("first reading: %+v", info)
	}
	r.Pause()
	defer r.Resume()
	time.Sleep(200 * time.Millisecond) // several readings time out
	select {
	case info := <-ch:
		t.Errorf("Observe sent %+v while Redis was stalled", info)
	default:
	}
	start := time.Now()
	cancel()
	for range ch {
		t.Errorf("Observe sent a reading after its context ended")
	}
	if took := time.Since(start); took > locktest.Bound(100*time.Millisecond) {
		t.Errorf("Observe's channel closed %v after its context ended, want within %v", took, locktest.Bound(100*time.Millisecond))
	}
}

// TestObserveEndsWhenTheClientIsClosed: Observe of a closed Client, which
// can never read again, closes its channel instead of polling silently
// until its context ends.
func TestObserveEndsWhenTheClientIsClosed(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := leader.Observe(ctx, c, "closed", 10*time.Millisecond)
	if info := <-ch; info.Led {
		t.Fatalf("first reading: %+v", info)
	}
	_ = c.Close()
	closed := make(chan struct{})
	go func() {
		for range ch {
		}
		close(closed)
	}()
	locktest.Within(t, closed, locktest.Bound(time.Second), "Observe's channel closed after its Client was")
}

// TestObserveFasterThanRedisAnswers: an interval shorter than Redis's
// round trip still gets readings: each may take longer than the
// interval, rather than being cut off by it and skipped, every time.
func TestObserveFasterThanRedisAnswers(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	proxy := locktest.StartProxy(t, r.Addr)
	proxy.SlowClients(30 * time.Millisecond)
	c := locktest.NewClient(t, redis.NewClient(&redis.Options{Addr: proxy.Addr()}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := leader.Observe(ctx, c, "slow", 5*time.Millisecond)
	select {
	case info := <-ch:
		if info.Led {
			t.Errorf("first reading: %+v", info)
		}
	case <-time.After(locktest.Bound(time.Second)):
		t.Fatalf("no reading within %v with a 5 ms interval and Redis answering in 30 ms", locktest.Bound(time.Second))
	}
}
