package cronlock_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

const (
	crashJob   = "crash"
	crashLease = time.Second // the run lock's lease, renewed by the watchdog
)

// runForever is the child process of TestKilledRunnerFreesJob: a replica
// whose run of the job says so on stdout and never ends.
func runForever(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	locker, err := lock.New(rdb, lock.WithDefaultLease(crashLease))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	c := cron.New(cron.WithSeconds())
	s := cronlock.New(c, locker)
	_, err = s.AddFunc("@every 1s", crashJob, func(ctx context.Context) error {
		fmt.Println("running")
		<-ctx.Done()
		return nil
	})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s.Start()
	select {}
}

// TestKilledRunnerFreesJob kills a replica with SIGKILL in the middle of a
// run: the job must not stay blocked beyond the run lock's lease, and
// another replica must run a following tick.
func TestKilledRunnerFreesJob(t *testing.T) {
	t.Parallel()
	srv, rdb := newReal(t)
	cmd := locktest.StartChild(t, "CRONLOCK_CHILD_RUN="+srv.Addr, "running")

	// A replica in this process sees the job held by the child.
	var started atomic.Int64 // UnixNano of this replica's first run
	rec := newRecorder()
	c := cron.New(cron.WithSeconds())
	s := newScheduler(t, c, locktest.NewClient(t, rdb, lock.WithDefaultLease(crashLease)), rec)
	mustAdd(t, s, "@every 1s", crashJob, func(context.Context) error {
		started.CompareAndSwap(0, time.Now().UnixNano())
		return nil
	})
	s.Start()
	rec.waitN(t, 2, 5*time.Second)
	if n := rec.count(cronlock.OutcomeRan); n != 0 {
		t.Fatalf("%d runs while the child ran the job: %v", n, rec.all())
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	rec.waitFor(t, cronlock.OutcomeRan, 5*time.Second)
	d := time.Unix(0, started.Load()).Sub(killed)
	// The lease lapses within crashLease; the next tick comes within 1 s.
	if limit := crashLease + time.Second + 500*time.Millisecond; d > limit {
		t.Fatalf("first run %v after SIGKILL, want within %v", d, limit)
	}
	t.Logf("run lock free and job run %v after SIGKILL (lease %v, period 1s)", d, crashLease)
}
