package cronlock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
)

func TestOutcomeString(t *testing.T) {
	for o, want := range map[cronlock.Outcome]string{
		cronlock.OutcomeRan:              "ran",
		cronlock.OutcomeSkippedHeld:      "skipped-held",
		cronlock.OutcomeSkippedTickDone:  "skipped-tick-done",
		cronlock.OutcomeSkippedLate:      "skipped-late",
		cronlock.OutcomeFailed:           "failed",
		cronlock.OutcomeLost:             "lost",
		cronlock.OutcomeStopped:          "stopped",
		cronlock.OutcomeSkippedOtherSpec: "skipped-other-spec",
		cronlock.OutcomeSkippedSkew:      "skipped-skew",
		0:                                "unknown",
		cronlock.OutcomeSkippedSkew + 1:  "unknown",
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}

// TestLogRecords checks the slog record of each kind of attempt: its
// level and attributes.
func TestLogRecords(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := cron.New(cron.WithSeconds())
	s := cronlock.New(c, lockerOnly{locktest.NewClient(t, newRedis(t))}, cronlock.WithLogger(logger), cronlock.WithClock(newFakeClock(tick0).now))
	ok := mustAdd(t, s, "@every 1s", "ok", nop)
	bad := mustAdd(t, s, "@every 1s", "bad", func(context.Context) error { return errBoom })
	fire(c, ok)
	fire(c, ok) // the same tick again
	fire(c, bad)
	waitStopped(t, s)

	type record struct {
		Level, Msg, Job, Outcome, Tick, Error string
		Token                                 uint64
		Duration                              int64 // ns
	}
	var got []record
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got = append(got, r)
	}
	tick := tick0.Format("2006-01-02T15:04:05Z07:00")
	want := []record{
		{Level: "INFO", Msg: "cronlock run", Job: "ok", Outcome: "ran", Tick: tick, Token: 1},
		{Level: "DEBUG", Msg: "cronlock run", Job: "ok", Outcome: "skipped-tick-done", Tick: tick},
		{Level: "ERROR", Msg: "cronlock run", Job: "bad", Outcome: "failed", Tick: tick, Token: 1, Error: "boom"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if ran := got[i].Token != 0; ran != (got[i].Duration > 0) {
			t.Errorf("record %d: token %d, duration %d ns; want both or neither", i, got[i].Token, got[i].Duration)
		}
		got[i].Duration = 0
		got[i].Token = min(got[i].Token, 1) // a token or none: its value follows Redis's clock
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// A job name of any length allowed is logged cut to 200 bytes, with its
// length, on every attempt; the callback still gets it whole.
func TestLongNameLoggedCut(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := cron.New(cron.WithSeconds())
	var whole string
	s := cronlock.New(c, lockerOnly{locktest.NewClient(t, newRedis(t))}, cronlock.WithLogger(logger),
		cronlock.WithClock(newFakeClock(tick0).now), cronlock.WithOnAttempt(func(a cronlock.Attempt) { whole = a.Job }))
	name := strings.Repeat("é", cronlock.MaxNameLen/2)
	fire(c, mustAdd(t, s, "@every 1s", name, nop))
	waitStopped(t, s)
	var r struct{ Job string }
	if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
		t.Fatalf("%q: %v", buf.String(), err)
	}
	if len(r.Job) > 230 || !strings.HasSuffix(r.Job, fmt.Sprintf("…(%d bytes)", len(name))) || !utf8.ValidString(r.Job) {
		t.Errorf("logged job name of %d bytes: %.60q…", len(r.Job), r.Job)
	}
	if whole != name {
		t.Errorf("callback got a name of %d bytes, want the whole %d", len(whole), len(name))
	}
}
