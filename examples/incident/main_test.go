package main

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// lines is an io.Writer that keeps what a worker prints.
type lines struct {
	mu sync.Mutex
	s  []string
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.s = append(l.s, string(p))
	return len(p), nil
}

func (l *lines) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.s, "")
}

// TestIncident is the worked incident: a stuck holder force-unlocked, the
// waiter served, the stuck holder's late write rejected.
func TestIncident(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	var stuckOut, nextOut lines
	stuck := make(chan error, 1)
	go func() {
		stuck <- run(ctx, config{url: url, label: "stuck", key: "orders:42", lease: 600 * time.Millisecond, work: 2 * time.Second}, &stuckOut)
	}()
	waitFor(t, func() bool { return locktest.Held(t, rdb, "lockkit:{orders:42}") })
	next := make(chan error, 1)
	go func() {
		next <- run(ctx, config{url: url, label: "next", key: "orders:42", lease: time.Second, work: 10 * time.Millisecond}, &nextOut)
	}()
	waitFor(t, func() bool { return rdb.LLen(ctx, "lockkit:{orders:42}:queue").Val() == 1 })

	op := locktest.NewClient(t, rdb)
	f, err := op.ForceUnlock(ctx, "orders:42")
	if err != nil || f.Holder.Label != "stuck" || f.HandedTo.Label != "next" {
		t.Fatalf("ForceUnlock: %+v, %v", f, err)
	}
	if err := <-next; err != nil {
		t.Fatalf("next: %v\n%s", err, nextOut.text())
	}
	if err := <-stuck; !errors.Is(err, errRejected) {
		t.Fatalf("stuck: %v, want its write rejected\n%s", err, stuckOut.text())
	}
	out := stuckOut.text()
	for _, want := range []string{"lock context ended: " + lock.ErrLost.Error(), "REJECTED", "unlock: " + lock.ErrLost.Error()} {
		if !strings.Contains(out, want) {
			t.Fatalf("stuck worker's output lacks %q:\n%s", want, out)
		}
	}
}

func TestRunNeedsRedis(t *testing.T) {
	if err := run(context.Background(), config{}, &lines{}); err == nil {
		t.Fatal("no error without a Redis")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within 5 s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
