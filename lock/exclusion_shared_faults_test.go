package lock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion of shared holds under faults: at most limit permits of a key
// live at any instant, no reader with a writer, and every acquisition's
// fencing token unique and larger than the token of every acquisition
// that ended before it began, with Redis frozen (SIGSTOP) again and again
// for up to 700 ms, leases of 1 s that lapse, and callers cut off by their
// deadlines.

// shareRegister checks, from inside the process, the holders of one key:
// a holder registers when its call returns and leaves when its section
// ends (its unlock, or its context ending first). Counted are the holders
// whose context is live.
type shareRegister struct {
	mu         sync.Mutex
	limit      int // 0: a read-write lock
	live       map[context.Context]string
	tokens     map[uint64]bool
	ended      uint64 // the largest token of a section that ended
	violations []string
	sections   atomic.Int64
	most       int
}

func newShareRegister(limit int) *shareRegister {
	return &shareRegister{limit: limit, live: map[context.Context]string{}, tokens: map[uint64]bool{}}
}

// enter registers lctx, a hold of kind ("p", "r" or "w") of key taken by
// a call that started when ended was the largest token of an ended section.
func (r *shareRegister) enter(lctx context.Context, key, kind string, endedBefore uint64) {
	tok, _ := lock.FencingToken(lctx, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sections.Add(1)
	readers, writers, n := 0, 0, 0
	for c, k := range r.live {
		if c.Err() != nil {
			continue
		}
		n++
		if k == "w" {
			writers++
		} else {
			readers++
		}
	}
	at := time.Now().Format("15:04:05.000000")
	switch {
	case r.limit > 0 && n >= r.limit:
		r.violations = append(r.violations, fmt.Sprintf("%s: a permit taken while %d holders' contexts were live (limit %d)", at, n, r.limit))
	case kind == "w" && n > 0:
		r.violations = append(r.violations, fmt.Sprintf("%s: the write lock taken while %d readers and %d writers were live", at, readers, writers))
	case kind == "r" && writers > 0:
		r.violations = append(r.violations, fmt.Sprintf("%s: a read hold taken while a writer was live", at))
	}
	r.most = max(r.most, n+1)
	if r.tokens[tok] {
		r.violations = append(r.violations, fmt.Sprintf("%s: token %d given twice", at, tok))
	}
	if tok <= endedBefore {
		r.violations = append(r.violations, fmt.Sprintf("%s: token %d not above %d, of a hold that ended before the call", at, tok, endedBefore))
	}
	r.tokens[tok] = true
	r.live[lctx] = kind
}

func (r *shareRegister) leave(lctx context.Context, key string) {
	tok, _ := lock.FencingToken(lctx, key)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, lctx)
	r.ended = max(r.ended, tok)
}

func (r *shareRegister) endedToken() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ended
}

func (r *shareRegister) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, v := range r.violations {
		if i == 10 {
			t.Errorf("... and %d more", len(r.violations)-10)
			break
		}
		t.Error(v)
	}
}

// shareContend runs workers taking key through clients until stop is
// closed: kinds picks each call's kind ("p", "r" or "w").
func shareContend(clients []*lock.Client, key string, limit, workers int, kinds string, reg *shareRegister, stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[w%len(clients)]
			for {
				select {
				case <-stop:
					return
				default:
				}
				kind := string(kinds[rand.N(len(kinds))])
				// The call waits 50-850 ms at most; its context is cancelled
				// after the section: the hold's context derives from it.
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(50+rand.N(800))*time.Millisecond)
				before := reg.endedToken()
				var lctx context.Context
				var unlock lock.UnlockFunc
				var err error
				try := rand.N(4) == 0
				switch {
				case kind == "p" && try:
					lctx, unlock, err = c.TryAcquire(ctx, key, limit)
				case kind == "p":
					lctx, unlock, err = c.Acquire(ctx, key, limit)
				case kind == "r" && try:
					lctx, unlock, err = c.TryRLock(ctx, key)
				case kind == "r":
					lctx, unlock, err = c.RLock(ctx, key)
				case try:
					lctx, unlock, err = c.TryLock(ctx, key)
				default:
					lctx, unlock, err = c.Lock(ctx, key)
				}
				if err != nil {
					cancel()
					time.Sleep(time.Millisecond + time.Duration(rand.N(4000))*time.Microsecond)
					continue
				}
				reg.enter(lctx, key, kind, before)
				inner := lock.UnlockFunc(func() error { return nil })
				if rand.N(4) == 0 && kind != "p" { // the writer's or reader's read re-entry
					if _, u, err := c.RLock(lctx, key); err == nil {
						inner = u
					}
				}
				select {
				case <-lctx.Done():
				case <-time.After(time.Duration(rand.N(40)) * time.Millisecond):
				}
				reg.leave(lctx, key)
				_ = inner()
				_ = unlock()
				cancel()
			}
		}()
	}
	return &wg
}

func TestExclusionSharedWhileRedisStutters(t *testing.T) {
	// Its workers load the CPU: it runs alone, not beside the parallel
	// tests whose time bounds that would upset (see TestMain).
	for _, tc := range []struct {
		name  string
		limit int
		kinds string
	}{
		{"semaphore of 3", 3, "p"},
		{"semaphore of 1", 1, "p"},
		{"read-write", 0, "rrrw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := newReal(t)
			var clients []*lock.Client
			for range 3 {
				clients = append(clients, locktest.NewClient(t, srv.Client(t), lock.WithDefaultLease(time.Second)))
			}
			key := "sh-excl-" + randKey()
			reg := newShareRegister(tc.limit)
			stop := make(chan struct{})
			wg := shareContend(clients, key, tc.limit, 8, tc.kinds, reg, stop)
			start := time.Now()
			pauses := 0
			for time.Since(start) < 4*time.Second {
				time.Sleep(time.Duration(100+rand.N(400)) * time.Millisecond)
				srv.Pause()
				pauses++
				time.Sleep(time.Duration(50+rand.N(650)) * time.Millisecond)
				srv.Resume()
			}
			for time.Since(start) < 30*time.Second && reg.sections.Load() < 30 {
				time.Sleep(50 * time.Millisecond)
			}
			close(stop)
			wg.Wait()
			t.Logf("%d sections over %d pauses, at most %d holders at once", reg.sections.Load(), pauses, reg.most)
			reg.check(t)
			if reg.sections.Load() < 30 {
				t.Errorf("only %d sections in %v", reg.sections.Load(), time.Since(start).Round(time.Millisecond))
			}
			if tc.limit > 1 && reg.most < 2 {
				t.Errorf("at most %d holders at once: permits never ran together", reg.most)
			}
		})
	}
}
