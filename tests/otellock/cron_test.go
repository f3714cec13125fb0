package otellock_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/cronlock"
)

// TestCronRun: a job run by cronlock. The run starts with no span, so its
// lock.hold span is the root of the run's trace and the job's spans are its
// children. The tick marker, cronlock's bookkeeping, makes no trace, not
// even through a tracing Redis client.
func TestCronRun(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	traceRedis(tel, rdb)
	locker := tel.locker(t, rdb)

	ran := make(chan struct{}, 1)
	s := cronlock.New(cron.New(cron.WithSeconds()), locker, cronlock.WithLogger(slog.New(slog.DiscardHandler)))
	_, err := s.AddFunc("* * * * * *", "report", func(ctx context.Context) error {
		_, span := tel.tp.Tracer("test").Start(ctx, "build report")
		span.End()
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the job did not run within 5 s")
	}
	<-s.Stop().Done() // releases the locks

	runs := map[trace.SpanID]bool{} // lock.hold spans of the run lock
	for _, hold := range tel.ended("lock.hold") {
		if name := attr(t, hold, aName).AsString(); name != "cronlock:report" {
			t.Errorf("lock.hold named %s, want the job's name, cronlock:report", name)
		}
		runs[hold.SpanContext().SpanID()] = true
		if hold.Parent().IsValid() {
			t.Errorf("run's lock.hold has parent %v, want none", hold.Parent())
		}
		if len(hold.Links()) != 1 {
			t.Errorf("run's lock.hold has %d links, want 1 (its lock.acquire)", len(hold.Links()))
		}
	}
	jobs := tel.ended("build report")
	if len(runs) == 0 || len(jobs) == 0 {
		t.Fatalf("%d run holds and %d job spans, want some", len(runs), len(jobs))
	}
	for _, j := range jobs {
		if !runs[j.Parent().SpanID()] {
			t.Errorf("job span's parent %v is not a run's lock.hold", j.Parent().SpanID())
		}
	}
	for _, r := range roots(tel) {
		if r.Name() == "redis time" {
			continue // the Scheduler's clock check at Start (then every 30 s): not a lock
		}
		if (r.Name() != "lock.acquire" && r.Name() != "lock.hold") || attr(t, r, aName).AsString() != "cronlock:report" {
			t.Errorf("root span %s %v, want only the run lock's lock.acquire and lock.hold", r.Name(), r.Attributes())
		}
	}
	// The markers are metrics, under the job's one name: every run's tick
	// had its marker, so the name counts at least two acquisitions a run
	// where the spans show one.
	if n, _ := tel.collect(t).total(t, "lock.acquire.outcomes", aName.String("cronlock:report")); n < 2*int64(len(runs)) {
		t.Errorf("lock.acquire.outcomes of cronlock:report = %d for %d runs, want the marker's too (at least %d)", n, len(runs), 2*len(runs))
	}
}
