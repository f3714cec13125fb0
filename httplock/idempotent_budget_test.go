package httplock

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
)

// acquisitionSteps stands before each Redis step of the acquisition
// phase (1: the first read of the answer, 2: TryLock, 3: the read once
// locked) and runs at with the step's number and the context of its
// Redis call (TryLock's: its caller's); it counts the reads and notes
// their deadlines.
type acquisitionSteps struct {
	mu        sync.Mutex
	reads     int
	deadlines []time.Time // of the reads; zero when none
	at        func(step int)
}

func (s *acquisitionSteps) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *acquisitionSteps) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "hmget" {
			d, _ := ctx.Deadline()
			s.mu.Lock()
			s.reads++
			step := map[int]int{1: 1, 2: 3}[s.reads]
			s.deadlines = append(s.deadlines, d)
			s.mu.Unlock()
			s.at(step)
		}
		return next(ctx, cmd)
	}
}

func (s *acquisitionSteps) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (s *acquisitionSteps) read() (int, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads, append([]time.Time(nil), s.deadlines...)
}

// stepsMux serves counted on payRoute under a middleware whose
// acquisition steps run at first, with an acquire timeout of budget.
func stepsMux(t *testing.T, e *idemEnv, runs *atomic.Int64, budget time.Duration, at func(step int)) (*http.ServeMux, *acquisitionSteps) {
	t.Helper()
	steps := &acquisitionSteps{at: at}
	rdb := e.srv.Client(t)
	rdb.AddHook(steps)
	m, err := NewIdempotency(beforeTryLock{e.locker, func() { at(2) }}, rdb,
		WithOutcome(e.outcome), WithIdempotencyAcquireTimeout(budget))
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(payRoute, m.Handler(counted(runs)))
	return mux, steps
}

// TestIdempotentAcquisitionOneBudget stalls Redis (SIGSTOP) at each step
// of the acquisition phase after slowing the steps before it: the
// request is answered 503 within the one acquire timeout, and every read
// is bounded by the deadline of the first.
func TestIdempotentAcquisitionOneBudget(t *testing.T) {
	const budget = 400 * time.Millisecond
	const slow = budget * 2 / 5 // each step before the stalled one
	for stall := 1; stall <= 3; stall++ {
		t.Run(map[int]string{1: "first read", 2: "TryLock", 3: "read once locked"}[stall], func(t *testing.T) {
			e := newIdemEnv(t)
			t.Cleanup(e.srv.Resume) // before the server stops
			var runs atomic.Int64
			h, steps := stepsMux(t, e, &runs, budget, func(step int) {
				switch {
				case step < stall:
					e.srv.Pause()
					time.AfterFunc(slow, e.srv.Resume)
				case step == stall:
					e.srv.Pause()
				}
			})
			start := time.Now()
			w := serve(h, pay("1", "k", "amount=5"))
			took := time.Since(start)
			locktest.CheckProblem(t, w, http.StatusServiceUnavailable)
			if limit := locktest.Bound(budget + 100*time.Millisecond); took > limit {
				t.Fatalf("the 503 took %v, more than %v", took, limit)
			}
			reads, deadlines := steps.read()
			if want := map[int]int{1: 1, 2: 1, 3: 2}[stall]; reads != want {
				t.Fatalf("%d reads, want %d", reads, want)
			}
			for i, d := range deadlines {
				if d.IsZero() || d.After(deadlines[0]) {
					t.Fatalf("read %d has the deadline %v, %v after the first read's: more than one budget",
						i+1, d, d.Sub(deadlines[0]))
				}
			}
			if runs.Load() != 0 {
				t.Fatal("the handler ran")
			}
			e.checkOutcomes(t, "unavailable")
		})
	}
}

// TestIdempotentAcquisitionBudgetSpent slows the first read and TryLock
// by more than the acquire timeout together, each by less: the request
// is answered 503 and the read once locked is never sent.
func TestIdempotentAcquisitionBudgetSpent(t *testing.T) {
	const budget = 400 * time.Millisecond
	e := newIdemEnv(t)
	t.Cleanup(e.srv.Resume)
	var runs atomic.Int64
	h, steps := stepsMux(t, e, &runs, budget, func(step int) {
		e.srv.Pause()
		time.AfterFunc(budget*3/5, e.srv.Resume)
	})
	locktest.CheckProblem(t, serve(h, pay("1", "k", "amount=5")), http.StatusServiceUnavailable)
	if reads, _ := steps.read(); reads != 1 {
		t.Fatalf("%d reads, want 1: the steps after the budget was spent went on", reads)
	}
	if runs.Load() != 0 {
		t.Fatal("the handler ran after the acquire timeout was spent")
	}
	e.checkOutcomes(t, "unavailable")
	waitReleased(t)
	// Redis may have granted the late TryLock: the lock Client frees it.
	_, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	locktest.Eventually(t, locktest.Bound(3*time.Second), "the run lock free", func() bool {
		_, unlock, err := e.locker.TryLock(context.Background(), run)
		if err == nil {
			_ = unlock()
		}
		return err == nil
	})
}

// TestIdempotentAcquisitionRequestDeadline gives the request a deadline
// sooner than the acquire timeout and stalls Redis at the first read:
// the read is bounded by the request's deadline.
func TestIdempotentAcquisitionRequestDeadline(t *testing.T) {
	const budget = 2 * time.Second
	e := newIdemEnv(t)
	t.Cleanup(e.srv.Resume)
	var runs atomic.Int64
	h, steps := stepsMux(t, e, &runs, budget, func(int) { e.srv.Pause() })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	start := time.Now()
	w := serve(h, pay("1", "k", "").WithContext(ctx))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", w.Code)
	}
	if took, limit := time.Since(start), locktest.Bound(400*time.Millisecond); took > limit {
		t.Fatalf("the 503 took %v, more than %v", took, limit)
	}
	if _, deadlines := steps.read(); len(deadlines) != 1 || deadlines[0].After(want) {
		t.Fatalf("read deadlines %v, want one no later than the request's %v", deadlines, want)
	}
}
