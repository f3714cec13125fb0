package gocronlock_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// childEnv names the job a child process runs (see runChild):
// "addr,job".
const childEnv = "LOCKKIT_GOCRON_CHILD"

// Timing of TestCrashedReplicasRunMovesOn's job, in both processes.
const (
	crashInterval = 2 * time.Second
	crashHold     = time.Second
	crashLease    = time.Second
)

// runChild runs the child process its environment asks for, if any, and
// reports whether it did: a replica of a job every 2 s on gocron whose
// run says "running" on stdout and never ends, until the process is
// killed.
func runChild() bool {
	v := os.Getenv(childEnv)
	if v == "" {
		return false
	}
	addr, job, _ := strings.Cut(v, ",")
	c, err := lock.New(redis.NewClient(&redis.Options{Addr: addr}))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	l, err := gocronlock.NewLocker(c, gocronlock.WithMinHold(crashHold), gocronlock.WithLease(crashLease), gocronlock.WithLogger(quiet))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	var once sync.Once
	if _, err := s.NewJob(gocron.CronJob("*/2 * * * * *", true), l.Task(func(context.Context) error {
		once.Do(func() { fmt.Println("running") })
		select {}
	}), gocron.WithName(job)); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	s.Start()
	select {}
}

// TestCrashedReplicasRunMovesOn kills (SIGKILL) a replica in a process of
// its own while it runs a tick of a job every 2 s (run lock lease 1 s,
// minimum hold 1 s); the other replica, whose clock is 600 ms behind,
// runs the job from the first tick after the dead run lock's lease, and
// the dead replica's marker lapses within its lease.
func TestCrashedReplicasRunMovesOn(t *testing.T) {
	t.Parallel()
	r, rdb := locktest.NewRedis(t)
	name, rec := uniqueName(), &recorder{}
	child := locktest.StartChild(t, childEnv+"="+r.Addr+","+name, "running")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = child.Wait()
	l := newLocker(t, locktest.NewClient(t, rdb), rec, gocronlock.WithMinHold(crashHold), gocronlock.WithLease(crashLease))
	clock := offsetClock{clockwork.NewRealClock(), -600 * time.Millisecond}
	s := newScheduler(t, gocron.WithClock(clock), gocron.WithDistributedLocker(l))
	ran := make(chan struct{})
	var once sync.Once
	if _, err := s.NewJob(gocron.CronJob("*/2 * * * * *", true), l.Task(func(context.Context) error {
		once.Do(func() { close(ran) })
		return nil
	}), gocron.WithName(name)); err != nil {
		t.Fatalf("NewJob: %v", err)
	}
	s.Start()
	marker := "lockkit:{gocronlock:tick:" + name + "}"
	locktest.Eventually(t, locktest.Bound(crashHold+crashHold/8+50*time.Millisecond), "the dead replica's marker lapses", func() bool {
		return !r.Exists(marker)
	})
	// The dead run lock lapses within its lease; the next tick after
	// that is at most an interval later, and fires 600 ms late here.
	limit := crashLease + crashInterval + 600*time.Millisecond + locktest.Bound(500*time.Millisecond)
	if !locktest.ClosedWithin(ran, limit-time.Since(killed)) {
		t.Fatalf("no run %v after the running replica was killed; attempts: %v", limit, rec.all())
	}
	t.Logf("first run %v after the kill; attempts: %v", time.Since(killed).Round(time.Millisecond), rec.all())
	_ = s.Shutdown()
	for _, a := range rec.all() {
		if a.Outcome == gocronlock.OutcomeFailed || a.Outcome == gocronlock.OutcomeLost {
			t.Errorf("attempt %+v, want ran or skipped", a)
		}
	}
}
