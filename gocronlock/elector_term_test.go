package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/leader"
)

// TestElectorFuncRunsWhenIsLeader starts Electors one after another and,
// the moment IsLeader first says this replica leads, calls a function
// wrapped with Func, as gocron does for a run: it runs, rather than
// return ErrNotLeader while the replica leads.
func TestElectorFuncRunsWhenIsLeader(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	c := locktest.NewClient(t, rdb)
	election := uniqueName()
	skipped := 0
	const terms = 150
	for range terms {
		e, err := gocronlock.NewElector(c, election, leader.WithLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(locktest.Bound(time.Second))
		for e.IsLeader(context.Background()) != nil {
			if time.Now().After(deadline) {
				t.Fatal("no term within a second")
			}
		}
		err = e.Func(func(context.Context) error { return nil })(context.Background())
		if errors.Is(err, gocronlock.ErrNotLeader) && e.IsLeader(context.Background()) == nil {
			skipped++
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if skipped > 0 {
		t.Errorf("%d of %d terms: Func returned ErrNotLeader right after IsLeader said this replica leads, and it still did", skipped, terms)
	}
}
