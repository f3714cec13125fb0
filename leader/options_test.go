package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// TestBadInputIsInvalid: what cannot work is refused with an error
// matching lock.ErrInvalid, at once.
func TestBadInputIsInvalid(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), locktest.Bound(2*time.Second))
	defer cancel()
	lead := func(ctx context.Context) error { <-ctx.Done(); return nil }
	for _, tc := range []struct {
		name   string
		locker lock.Locker
		elect  string
		lead   func(context.Context) error
		opts   []leader.Option
	}{
		{"nil locker", nil, "x", lead, nil},
		{"empty name", c, "", lead, nil},
		{"nil lead", c, "x", nil, nil},
		{"zero back-off", c, "x", lead, []leader.Option{leader.WithBackoff(0, time.Second)}},
		{"negative back-off", c, "x", lead, []leader.Option{leader.WithBackoff(-time.Second, time.Second)}},
		{"max below initial", c, "x", lead, []leader.Option{leader.WithBackoff(time.Second, time.Millisecond)}},
		{"lease below lock.MinLease", c, "x", lead, []leader.Option{leader.WithLease(lock.MinLease - 1)}},
		{"zero lease", c, "x", lead, []leader.Option{leader.WithLease(0)}},
		{"nil logger", c, "x", lead, []leader.Option{leader.WithLogger(nil)}},
	} {
		if err := leader.Run(ctx, tc.locker, tc.elect, tc.lead, tc.opts...); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: Run: %v, want lock.ErrInvalid", tc.name, err)
		}
	}
	drifty := locktest.NewClient(t, r.Client(t), lock.WithDrift(20*time.Millisecond))
	if err := leader.Run(ctx, drifty, "x", lead, leader.WithLease(30*time.Millisecond)); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("a lease the Client refuses for its drift: Run: %v, want lock.ErrInvalid", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the bad calls took the context's %v", locktest.Bound(2*time.Second))
	}
}

// TestSecondRunOfAnElectionIsInvalid: one Election runs once at a time; a
// second Run is refused and leaves the first running, and the Election
// runs again after the first returned.
func TestSecondRunOfAnElectionIsInvalid(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	e, err := leader.New(c, "twice")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leading := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- e.Run(ctx, func(ctx context.Context) error { close(leading); <-ctx.Done(); return nil })
	}()
	locktest.Within(t, leading, locktest.Bound(2*time.Second), "the first Run leads")
	if err := e.Run(context.Background(), func(context.Context) error { return nil }); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("a second Run at once: %v, want lock.ErrInvalid", err)
	}
	if !e.IsLeader() {
		t.Errorf("the first Run no longer leads after the second was refused")
	}
	cancel()
	if err := <-ran; err != context.Canceled {
		t.Errorf("first Run: %v", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	if err := e.Run(ctx2, func(context.Context) error { cancel2(); return nil }); err != context.Canceled {
		t.Errorf("a Run after the first returned: %v, want context.Canceled", err)
	}
}
