package lock

import (
	"context"
	"fmt"
	"time"
)

// unlock releases one level, and the levels entered through it; it is the
// level's UnlockFunc.
func (l *level) unlock() error {
	h := l.h
	h.mu.Lock()
	unlocked := l.unlocked
	h.mu.Unlock()
	if unlocked {
		return l.notHeld()
	}
	ctx, cancel := unlockContext(l.ctx)
	defer cancel()
	// Close cuts an unlock still waiting for Redis: it returns ErrClosed,
	// and what the release still owes Redis goes on as Close's cleanups
	// do, so no caller's goroutine waits on Redis after Close.
	h.c.cutAtClose(ctx, cancel)
	defer h.c.uncut(ctx)
	if !h.lockOps(ctx) {
		return l.abandon(ctx)
	}
	defer h.unlockOps()
	h.mu.Lock()
	if l.unlocked {
		h.mu.Unlock()
		return l.notHeld()
	}
	ended := h.endLevelsLocked(l, make([]*level, 0, 1))
	n := len(h.levels)
	reported := h.end != nil // the loss or Close that ended the hold told the observer
	h.checkValidityLocked()
	end := h.end
	if n == 0 {
		h.endLocked(errDone) // no more renewals, whatever Redis answers
	}
	h.mu.Unlock()

	var err error
	switch end {
	case nil:
		err = h.unlockRelease(ctx, n)
	case ErrLost:
		if n == 0 {
			_ = h.unlockRelease(ctx, 0) // lets others in sooner if the key is still ours
		}
		err = ErrLost
	case ErrClosed:
		err = ErrClosed // Close released the key, or its lease lapses
	}
	h.mu.Lock()
	if err == ErrLost && h.end == ErrClosed {
		// Close ended the hold while the release was on its way, and
		// released the key first: not a loss.
		err = ErrClosed
	}
	if err == ErrLost {
		h.loseLocked(LossKeyGone) // for the levels still held
	}
	if !reported {
		for _, x := range ended {
			h.c.reportRelease(x, err)
		}
	}
	h.mu.Unlock()
	for _, x := range ended[1:] {
		x.cancel(errOuterUnlocked) // before l, from whose context theirs derive
	}
	switch err {
	case ErrLost, ErrClosed:
		l.cancel(err) // the lock was gone, or Close ended it, before this unlock
	default:
		l.cancel(errUnlocked)
	}
	return err
}

// release moves the owner's hold count in Redis to n, deleting the key and
// announcing the release at 0, and returns ErrLost when the owner no longer
// held the key. It waits for Redis until ctx is done.
func (h *hold) release(ctx context.Context, n int) error {
	be := h.c.be
	set := be.nodes()
	v := h.releaseVotes(ctx, n)
	if n == 0 && v.yes > 0 {
		be.freed(h.rk, h.owner)
	}
	switch {
	case set.won(v):
		return nil
	case set.lost(v):
		return ErrLost
	}
	return fmt.Errorf("lock: release %q: %w", h.key, be.failure(v))
}

// releaseVotes runs release.lua on every node and tallies the answers
// (see backend.release).
func (h *hold) releaseVotes(ctx context.Context, n int) votes {
	if n == 0 {
		h.releasing.Store(true)
	}
	return h.c.be.release(ctx, h, n)
}

// unlockContext is the context of an unlock's Redis calls: without the
// cancellation of ctx, the level's context, so that a cancelled request
// still releases, and until the earlier of ctx's deadline (at least
// unlockGrace from now) and releaseTimeout from now: a far deadline does
// not keep an unlock waiting on a stalled Redis for longer than one
// without a deadline would.
func unlockContext(ctx context.Context) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(releaseTimeout)
	if d, ok := ctx.Deadline(); ok {
		deadline = minTime(deadline, maxTime(d, time.Now()).Add(unlockGrace))
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// unlockRelease is an unlock's release within ctx (see unlockContext). A
// final release Redis did not confirm (an error, node timeouts, or ctx
// ending) goes on in the background.
func (h *hold) unlockRelease(ctx context.Context, n int) error {
	err := h.release(ctx, n)
	if err != nil && err != ErrLost && n == 0 {
		h.c.abandon(h, true, 0) // not confirmed: the janitor tries until Redis answers
	}
	if err != nil && err != ErrLost && ctx.Err() != nil {
		if h.c.isClosed() {
			return ErrClosed
		}
		return h.notConfirmed(ctx)
	}
	return err
}

// notConfirmed is the error of an unlock whose release Redis did not
// confirm before ctx's deadline.
func (h *hold) notConfirmed(ctx context.Context) error {
	return fmt.Errorf("lock: release %q not confirmed in time (it goes on in the background): %w", h.key, ctx.Err())
}

// abandon ends l, whose unlock could not send its release before ctx's
// deadline because another command of the hold is stuck in Redis: the
// level ends here, and the janitor releases the owner if that was the
// last one.
func (l *level) abandon(ctx context.Context) error {
	h := l.h
	h.mu.Lock()
	if l.unlocked {
		h.mu.Unlock()
		return l.notHeld()
	}
	ended := h.endLevelsLocked(l, make([]*level, 0, 1))
	last := len(h.levels) == 0
	err := h.notConfirmed(ctx)
	if h.c.isClosed() {
		err = ErrClosed // Close cut the unlock (see unlock)
	}
	if h.end == nil {
		for _, x := range ended {
			h.c.reportRelease(x, err)
		}
	}
	if last {
		h.endLocked(errDone)
	}
	h.mu.Unlock()
	if last {
		h.c.abandon(h, true, 0)
	}
	for _, x := range ended[1:] {
		x.cancel(errOuterUnlocked)
	}
	if err == ErrClosed {
		l.cancel(ErrClosed)
	} else {
		l.cancel(errUnlocked)
	}
	return err
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
