package lock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

var (
	// errDone ends a hold whose last level was unlocked.
	errDone = errors.New("lock: released")

	// errReleased tells a re-entry that the level its context carried was
	// unlocked meanwhile: the context no longer holds the key.
	errReleased = errors.New("lock: level unlocked")

	// errOuterUnlocked is the cause of the levels entered through a level
	// that was unlocked before them.
	errOuterUnlocked = fmt.Errorf("%w: a hold level it was entered through was unlocked first", ErrNotHeld)

	// errUnlocked is the cause of a level's context once its unlock ran:
	// the lock was let go, which the caller must not confuse with its own
	// context.Canceled (the caller went away, the lock still held).
	errUnlocked = fmt.Errorf("%w: unlocked", ErrNotHeld)
)

// A level is one successful Lock or TryLock call: one hold count.
type level struct {
	h         *hold
	prev      *level          // the level the caller's context carried, if any
	held      context.Context // carries this level (&carrier); cancelled when it ends
	ctx       context.Context // returned to the caller (held, or the observer's)
	cancel    context.CancelCauseFunc
	start     time.Time
	reentrant bool
	unlocked  bool // guarded by h.mu; also set when an outer level was unlocked first
	carrier   carrier
}

type levelKey struct{}

// A carrier is a level's context: the level's cancellable context, with
// the level as the value of levelKey{}. Kept in the level, it costs no
// allocation of its own.
type carrier struct {
	context.Context
	l *level
}

func (c *carrier) Value(key any) any {
	if key == (levelKey{}) {
		return c.l
	}
	return c.Context.Value(key)
}

// newLevelLocked adds a level for cl and tells the observer, before any
// loss or release of the hold can be reported for it.
func (h *hold) newLevelLocked(cl *call) *level {
	cctx, cancel := h.c.levelContext(cl)
	l := &h.outer // the hold's first level; re-entries have their own
	if h.outer.h != nil {
		l = new(level)
	}
	*l = level{h: h, cancel: cancel, start: time.Now(), reentrant: len(h.levels) > 0}
	l.prev, _ = cl.ctx.Value(levelKey{}).(*level)
	l.carrier = carrier{Context: cctx, l: l}
	l.held = &l.carrier
	l.ctx = l.held
	if o := h.c.cfg.observer; o != nil {
		cl.a.Wait, cl.a.Outcome, cl.a.Token = time.Since(cl.start), OutcomeAcquired, h.token
		l.ctx = o.AcquireEnded(cl.rctx, cl.a, l.held)
	}
	h.levels = append(h.levels, l)
	return l
}

// notHeld is the error of an unlock of l, which is unlocked already,
// maybe by an unlock still under way (a second call of its UnlockFunc, or
// the unlock of a level it was entered through): it returns once l's
// context is cancelled, which that unlock does when it returns, bounded
// as it is (see unlockContext), so that after any UnlockFunc returned the
// level's context is done, with a cause matching ErrNotHeld or ErrLost.
func (l *level) notHeld() error {
	<-l.held.Done()
	return ErrNotHeld
}

// endLevelsLocked marks l and the levels entered through it unlocked,
// takes them out of the hold and returns them, l first, appended to
// ended (room the caller has for them).
func (h *hold) endLevelsLocked(l *level, ended []*level) []*level {
	ended = h.innerLocked(l, ended)
	for _, x := range ended {
		x.unlocked = true
	}
	h.levels = slices.DeleteFunc(h.levels, func(x *level) bool { return slices.Contains(ended, x) })
	return ended
}

// innerLocked appends to ended l and, innermost last, the live levels
// entered through it: those whose chain of carried levels leads to l.
func (h *hold) innerLocked(l *level, ended []*level) []*level {
	ended = append(ended, l)
	for _, x := range h.levels {
		for p := x.prev; p != nil; p = p.prev {
			if p == l {
				ended = append(ended, x)
				break
			}
		}
	}
	return ended
}

func (c *Client) reportRelease(l *level, cause error) {
	if o := c.cfg.observer; o != nil {
		o.Released(l.ctx, Release{Key: l.h.key, Reentrant: l.reentrant, Held: time.Since(l.start), Cause: cause, Loss: l.h.lossOf(cause)})
	}
}

// findLevel returns the innermost level of key that ctx carries and that
// was not unlocked, taken by c, or by any Client when c is nil. Its hold
// may have ended by loss or Close.
func findLevel(ctx context.Context, c *Client, key string) *level {
	l, _ := ctx.Value(levelKey{}).(*level)
	for ; l != nil; l = l.prev {
		if l.h.key != key || (c != nil && l.h.c != c) {
			continue
		}
		l.h.mu.Lock()
		unlocked := l.unlocked
		l.h.mu.Unlock()
		if !unlocked {
			return l
		}
	}
	return nil
}

// Held reports whether ctx holds key: it was returned by a successful
// [Client.Lock] or [Client.TryLock] of key, or derives from one (also
// through [context.WithoutCancel]), that hold level was not unlocked, and
// its lease was not lost, ended by Close or let lapse. Held does not look
// at ctx.Err(): a context of [WithHoldUntilUnlock] that was cancelled still
// holds the key until unlock.
func Held(ctx context.Context, key string) bool {
	l := findLevel(ctx, nil, key)
	return l != nil && l.h.live()
}

// FencingToken returns the fencing token of the hold on key that ctx
// carries, and whether ctx holds key (see [Held]) with a token. Tokens
// strictly increase with every new acquisition of a key, across all Clients
// sharing the Redis, across expiries and across a flush or a restart
// without persistence (see "Fencing tokens" in the package documentation),
// so storage can reject writes from a stale holder. Re-entries share the outermost acquisition's token. A
// Client made by [NewQuorum] has no tokens: ok is false.
func FencingToken(ctx context.Context, key string) (uint64, bool) {
	// Tokens start at 1; a hold without one (see backend.token) has 0.
	if l := findLevel(ctx, nil, key); l != nil && l.h.token != 0 && l.h.live() {
		return l.h.token, true
	}
	return 0, false
}
