package leader_test

import (
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// handoverLease is the lease of the hand-over tests: a waiting replica
// that leads well within it was handed the lock, not given it by the
// lease's end.
const handoverLease = 5 * time.Second

// handoverBound is how soon the next replica must lead after a resign.
var handoverBound = locktest.Bound(500 * time.Millisecond)

// TestResignOnReturnHandsOverAtOnce: a leader whose lead returns releases
// the lock, and the replica waiting for it leads at once.
func TestResignOnReturnHandsOverAtOnce(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	tr := newTracker()
	stop := make(chan struct{}, 1) // the leader that takes it returns
	returnedAt := make(chan time.Time, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := runAll(t, ctx, []lock.Locker{cs[0], cs[1]}, "ret", func(i int) func(context.Context) error {
		return tr.lead(t, i, "ret", func(ctx context.Context) error {
			select {
			case <-stop:
				returnedAt <- time.Now()
			case <-ctx.Done():
			}
			return nil
		})
	}, leader.WithLease(handoverLease), leader.WithBackoff(time.Second, time.Second))
	defer func() { cancel(); <-done }()
	first := tr.next(t, locktest.Bound(2*time.Second))
	time.Sleep(50 * time.Millisecond) // the other replica queues
	stop <- struct{}{}
	second := tr.next(t, handoverLease)
	took := time.Since(<-returnedAt)
	if second == first {
		t.Fatalf("replica %d led again, before the waiting one (its back-off is 1 s)", first)
	}
	if took > handoverBound {
		t.Errorf("the next leader started %v after the leader's lead returned, want within %v (lease %v)", took, handoverBound, handoverLease)
	}
	t.Logf("hand-over on return: %v (lease %v)", took, handoverLease)
}

// TestResignOnContextEndHandsOverAtOnce: a leader whose Run's context ends
// (shutdown) resigns, and the waiting replica leads at once.
func TestResignOnContextEndHandsOverAtOnce(t *testing.T) {
	locktest.Timed(t)
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	tr := newTracker()
	ctxs := []context.Context{nil, nil}
	cancels := []context.CancelFunc{nil, nil}
	for i := range ctxs {
		ctxs[i], cancels[i] = context.WithCancel(context.Background())
	}
	defer cancels[0]()
	defer cancels[1]()
	returned := make(chan error, 2)
	for i := range 2 {
		go func() {
			returned <- leader.Run(ctxs[i], cs[i], "stop", tr.lead(t, i, "stop", nil), leader.WithLease(handoverLease))
		}()
	}
	first := tr.next(t, locktest.Bound(2*time.Second))
	time.Sleep(50 * time.Millisecond) // the other replica queues
	start := time.Now()
	cancels[first]()
	if err := <-returned; err != context.Canceled {
		t.Errorf("Run of the stopped leader: %v, want context.Canceled", err)
	}
	second := tr.next(t, handoverLease)
	took := time.Since(start)
	if second == first || took > handoverBound {
		t.Errorf("replica %d led %v after replica %d's context ended, want the other within %v (lease %v)", second, took, first, handoverBound, handoverLease)
	}
	cancels[second]()
	if err := <-returned; err != context.Canceled {
		t.Errorf("Run of the second leader: %v, want context.Canceled", err)
	}
	if terms, _ := tr.snapshot(); terms[0].cause != context.Canceled {
		t.Errorf("the stopped leader's lead context ended with cause %v, want context.Canceled (Run's)", terms[0].cause)
	}
	t.Logf("hand-over on shutdown: %v (lease %v)", took, handoverLease)
}

// TestIsLeaderAndTokenFollowTheTerm: IsLeader and Token tell the term
// from local state: true, with the lead context's token, while lead runs;
// false between terms and on the replica that waits; the token greater
// with every term.
func TestIsLeaderAndTokenFollowTheTerm(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	es := make([]*leader.Election, 2)
	for i := range es {
		var err error
		if es[i], err = leader.New(cs[i], "terms", leader.WithBackoff(time.Millisecond, time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if es[i].IsLeader() {
			t.Fatalf("election %d leads before it ran", i)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex // the leads share last and terms; Redis orders them, not Go
	var last uint64
	terms := 0
	lead := func(i int) func(context.Context) error {
		return func(lctx context.Context) error {
			mu.Lock()
			defer mu.Unlock()
			tok, ok := es[i].Token()
			want, _ := lock.FencingToken(lctx, leader.Key("terms"))
			if !es[i].IsLeader() || !ok || tok != want {
				t.Errorf("in lead: IsLeader %v, Token %d %v; want true, %d true", es[i].IsLeader(), tok, ok, want)
			}
			if es[1-i].IsLeader() {
				t.Errorf("both elections say they lead")
			}
			if tok <= last {
				t.Errorf("term %d has token %d, not above the last term's %d", terms, tok, last)
			}
			last = tok
			if terms++; terms == 20 {
				cancel()
			}
			return nil
		}
	}
	errs := make(chan error, 2)
	for i := range es {
		go func() { errs <- es[i].Run(ctx, lead(i)) }()
	}
	for range es {
		if err := <-errs; err != context.Canceled {
			t.Errorf("Run: %v", err)
		}
	}
	for i, e := range es {
		if tok, ok := e.Token(); e.IsLeader() || ok {
			t.Errorf("election %d after Run: IsLeader %v, Token %d %v", i, e.IsLeader(), tok, ok)
		}
	}
}

// TestPanicInLeadIsLoggedResignsAndCampaignsAgain: a panic in lead does
// not end Run: it is logged, the lock released, and Run campaigns again.
func TestPanicInLeadIsLoggedResignsAndCampaignsAgain(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	var log locktest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	var tokens []uint64
	err := leader.Run(ctx, c, "panic", func(lctx context.Context) error {
		tok, _ := lock.FencingToken(lctx, leader.Key("panic"))
		tokens = append(tokens, tok)
		if calls++; calls == 1 {
			panic("boom")
		}
		cancel()
		return nil
	}, leader.WithLogger(slog.New(slog.NewTextHandler(&log, nil))), leader.WithBackoff(time.Millisecond, time.Millisecond))
	if err != context.Canceled || calls != 2 {
		t.Fatalf("Run: %v after %d lead calls, want context.Canceled after 2", err, calls)
	}
	if tokens[1] <= tokens[0] {
		t.Errorf("the term after the panic has token %d, not above %d: the lock was not released and taken again", tokens[1], tokens[0])
	}
	if !strings.Contains(log.String(), "boom") {
		t.Errorf("the panic is not in the log:\n%s", log.String())
	}
}

// TestGoexitInLeadResigns: a lead that ends its goroutine with
// runtime.Goexit (t.FailNow in a test's lead) ends Run's goroutine, and
// Run still resigns on the way out: the waiting replica leads at once,
// and the Election neither leads nor counts as running.
func TestGoexitInLeadResigns(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	e, err := leader.New(cs[0], "goexit", leader.WithLease(handoverLease))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTracker()
	exit := make(chan struct{})
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_ = e.Run(context.Background(), tr.lead(t, 0, "goexit", func(ctx context.Context) error {
			<-exit
			runtime.Goexit()
			return nil
		}))
	}()
	tr.next(t, locktest.Bound(2*time.Second))
	ctx, cancel := context.WithCancel(context.Background())
	done := runAll(t, ctx, []lock.Locker{cs[1]}, "goexit", func(int) func(context.Context) error { return tr.lead(t, 1, "goexit", nil) })
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond) // the other replica queues
	start := time.Now()
	close(exit)
	<-gone
	if who := tr.next(t, handoverLease); who != 1 {
		t.Fatalf("replica %d leads", who)
	}
	if took := time.Since(start); took > handoverBound {
		t.Errorf("the next leader started %v after lead's Goexit, want within %v (lease %v)", took, handoverBound, handoverLease)
	}
	if e.IsLeader() {
		t.Errorf("the Election whose lead exited still says it leads")
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if err := e.Run(ctx2, func(context.Context) error { return nil }); err != context.Canceled {
		t.Errorf("Run after the Goexit: %v, want context.Canceled (not refused as running)", err)
	}
}

// TestPanicInLeadIsLoggedAfterShutdown: a panic in lead is logged, with
// its stack, even when Run's context ended before it (a shutdown), when
// Run returns rather than campaigning again.
func TestPanicInLeadIsLoggedAfterShutdown(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	var log locktest.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	err := leader.Run(ctx, c, "panic-late", func(context.Context) error {
		cancel()
		panic("late boom")
	}, leader.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != context.Canceled {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	if out := log.String(); !strings.Contains(out, "late boom") || !strings.Contains(out, "handover_test.go") {
		t.Errorf("the panic and its stack are not in the log:\n%s", out)
	}
}
