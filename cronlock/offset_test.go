package cronlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// A started Scheduler measures its clock's offset against Redis's TIME,
// exposes it, and logs at Error when it exceeds the skew tolerance.
func TestClockOffsetMeasured(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	for _, skew := range []time.Duration{0, 2 * time.Second, -2500 * time.Millisecond} {
		var logs locktest.SyncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, nil))
		s := cronlock.New(cron.New(), locktest.NewClient(t, rdb), cronlock.WithLogger(logger),
			cronlock.WithClock(func() time.Time { return time.Now().Add(skew) }))
		if _, ok := s.ClockOffset(); ok {
			t.Fatal("ClockOffset known before Start")
		}
		s.Start()
		deadline := time.Now().Add(5 * time.Second)
		off, ok := s.ClockOffset()
		for !ok && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			off, ok = s.ClockOffset()
		}
		waitStopped(t, s)
		t.Logf("clock %v off: measured offset %v", skew, off)
		if !ok {
			t.Fatalf("clock %v off: no offset measured within 5 s", skew)
		}
		if d := off + skew; d > 100*time.Millisecond || d < -100*time.Millisecond {
			t.Errorf("clock %v off: offset %v, want about %v", skew, off, -skew)
		}
		if logged := strings.Contains(logs.String(), "level=ERROR"); logged != (skew != 0) {
			t.Errorf("clock %v off: Error logged %v; logs:\n%s", skew, logged, logs.String())
		}
	}
}

// slowFirstTime is a lock.Client whose first Time call is held up for
// delay before Redis reads its clock, as a round trip slowed on its way
// there: measured over that round trip alone, the offset would be off by
// half of it.
type slowFirstTime struct {
	*lock.Client
	delay time.Duration
	calls atomic.Int32
}

func (c *slowFirstTime) Time(ctx context.Context) (time.Time, error) {
	if c.calls.Add(1) == 1 {
		time.Sleep(c.delay)
	}
	return c.Client.Integration().Time(ctx)
}

// A Scheduler measures its offset over the shortest of a few round trips,
// so one slow round trip does not shift its ticks: the host and Redis
// share a clock here, and a first round trip held up 60 ms on its way
// would alone give an offset of about 30 ms.
func TestClockOffsetFromShortestRoundTrip(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := &slowFirstTime{Client: locktest.NewClient(t, rdb), delay: 60 * time.Millisecond}
	s := cronlock.New(cron.New(), c)
	s.Start() // measures before it returns
	off, ok := s.ClockOffset()
	waitStopped(t, s)
	if !ok {
		t.Fatal("no offset measured by Start")
	}
	if off > 10*time.Millisecond || off < -10*time.Millisecond {
		t.Errorf("offset %v with one round trip 60 ms slow on its way, want within 10 ms of 0 (Redis runs on this host)", off)
	}
}

// slowTime is a lock.Client whose every Time call is held up for delay
// before Redis reads its clock.
type slowTime struct {
	*lock.Client
	delay time.Duration
}

func (c slowTime) Time(ctx context.Context) (time.Time, error) {
	time.Sleep(c.delay)
	return c.Client.Integration().Time(ctx)
}

// A measurement whose shortest round trip is longer than the skew
// tolerance (every round trip 600 ms here, as in a Redis that stalls
// during Start; tolerance 500 ms) does not count: the offset it gives may
// be half a round trip off, and two replicas so corrected could disagree
// by more than the tolerance. The offset stays unknown, so the Scheduler
// runs no tick.
func TestClockOffsetRefusesSlowRoundTrips(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := cron.New(cron.WithSeconds())
	rec := newRecorder()
	s := newScheduler(t, c, slowTime{locktest.NewClient(t, rdb), 600 * time.Millisecond}, rec)
	id := mustAdd(t, s, "@every 1s", uniqueName(), nop)
	s.Start()
	<-c.Stop().Done() // fired by hand
	off, ok := s.ClockOffset()
	t.Logf("offset %v, %v after round trips of 600 ms", off, ok)
	if ok {
		t.Errorf("offset %v measured over 600 ms round trips, want unknown", off)
	}
	fire(c, id)
	if a := rec.only(t); !errors.Is(a.Err, cronlock.ErrClockUnknown) {
		t.Errorf("attempt with the offset unknown: %s (%v), want failed, ErrClockUnknown", a.Outcome, a.Err)
	}
}
