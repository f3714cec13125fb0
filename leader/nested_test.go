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

// TestRunWithinATermOfItsElectionIsInvalid: a Run whose context is a
// lead context of the same election (the lock's re-entry would elect it
// at once, beside the leader) is refused with an error matching
// lock.ErrInvalid, and its lead never runs, on the leader's Client or on
// another; the outer term goes on.
func TestRunWithinATermOfItsElectionIsInvalid(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	cs := replicas(t, r, 2)
	ctx, cancel := context.WithTimeout(context.Background(), locktest.Bound(5*time.Second))
	defer cancel()
	tr := newTracker()
	var errs []error
	err := leader.Run(ctx, cs[0], "nest", tr.lead(t, 0, "nest", func(lctx context.Context) error {
		defer cancel()
		for i, c := range cs {
			ictx, icancel := context.WithTimeout(lctx, locktest.Bound(time.Second))
			errs = append(errs, leader.Run(ictx, c, "nest", tr.lead(t, 1+i, "nest", nil)))
			icancel()
		}
		if lctx.Err() != nil {
			t.Errorf("the outer term ended: %v", context.Cause(lctx))
		}
		return nil
	}))
	if err != context.Canceled {
		t.Errorf("outer Run: %v, want context.Canceled", err)
	}
	for i, err := range errs {
		if !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("a Run on replica %d within the term: %v, want lock.ErrInvalid", i, err)
		}
	}
	terms, most := tr.snapshot()
	checkTerms(t, terms, most)
	if len(terms) != 1 {
		t.Errorf("%d terms, want only the outer one", len(terms))
	}
}
