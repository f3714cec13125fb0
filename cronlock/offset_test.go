package cronlock_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
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
