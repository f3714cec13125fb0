package leader

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// outcome is what one campaign of a scriptedLocker does.
type outcome int

const (
	refused outcome = iota // Lock fails with a Redis error
	served                 // Lock succeeds; lead returns nil
	failed                 // Lock succeeds; lead returns an error
	lost                   // Lock succeeds; the hold is lost while lead runs
)

var errRedis = errors.New("redis: connection refused")

// scriptedLocker plays one outcome per Lock call, then cancels the test's
// context at the next.
type scriptedLocker struct {
	mu     sync.Mutex
	script []outcome
	calls  int
	stop   context.CancelFunc
	unlock int
}

func (s *scriptedLocker) Lock(ctx context.Context, key string, _ ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.calls == len(s.script) {
		s.stop()
		return nil, nil, ctx.Err()
	}
	o := s.script[s.calls]
	s.calls++
	if o == refused {
		return nil, nil, errRedis
	}
	lctx, cancel := context.WithCancelCause(ctx)
	if o == lost {
		cancel(lock.ErrLost)
	}
	return context.WithValue(lctx, outcomeKey{}, o), func() error {
		s.mu.Lock()
		s.unlock++
		s.mu.Unlock()
		cancel(lock.ErrNotHeld)
		return nil
	}, nil
}

func (s *scriptedLocker) TryLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	return s.Lock(ctx, key, opts...)
}

type outcomeKey struct{}

// playLead is the lead function of a scriptedLocker's terms.
func playLead(ctx context.Context) error {
	if ctx.Value(outcomeKey{}) == failed {
		return errors.New("lead failed")
	}
	return nil
}

// TestBackoffDoublesInARowAndResets: the pause before each campaign is
// the initial back-off after a term that ended well, and doubles, up to
// the maximum, while campaigns fail or terms end with an error or a loss.
func TestBackoffDoublesInARowAndResets(t *testing.T) {
	ms := time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &scriptedLocker{stop: cancel, script: []outcome{
		refused, refused, refused, refused, refused, // 10 20 40 80 100
		served,                // 10
		failed, lost, refused, // 10 20 40
		served, served, // 10 10
		lost, failed, served, // 10 20 10
	}}
	e, err := New(l, "b", WithBackoff(10*ms, 100*ms), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	var pauses []time.Duration
	e.pause = func(_ context.Context, d time.Duration) bool {
		pauses = append(pauses, d)
		return true
	}
	if err := e.Run(ctx, playLead); err != context.Canceled {
		t.Fatalf("Run: %v", err)
	}
	want := []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 100 * ms, 10 * ms, 10 * ms, 20 * ms, 40 * ms, 10 * ms, 10 * ms, 10 * ms, 20 * ms, 10 * ms}
	if !slices.Equal(pauses, want) {
		t.Errorf("pauses %v, want %v", pauses, want)
	}
	if terms := 8; l.unlock != terms {
		t.Errorf("%d unlocks after %d terms", l.unlock, terms)
	}
}
