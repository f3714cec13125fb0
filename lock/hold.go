package lock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// errDone ends a hold whose outermost level was unlocked.
var errDone = errors.New("lock: released")

// A hold is one owner's possession of one key: the outermost acquisition
// and every re-entry into it. Its hold levels are the live acquisitions;
// their number is the hold count kept in Redis.
type hold struct {
	c      *Client
	key    string
	rk     redisKeys
	owner  string
	lease  time.Duration
	fixed  bool            // no watchdog
	parent context.Context // the outermost caller's; renewal stops when it is done
	token  uint64

	mu         sync.Mutex
	levels     []*level // live levels, outermost first
	end        error    // nil while held; then errDone, ErrLost or ErrClosed
	validUntil time.Time
	timer      *time.Timer // ends the hold with ErrLost at validUntil
}

// A level is one successful Lock or TryLock call: one hold count.
type level struct {
	h         *hold
	prev      *level          // the level the caller's context carried, if any
	held      context.Context // carries this level; cancelled when it ends
	ctx       context.Context // returned to the caller (held, or the observer's)
	cancel    context.CancelCauseFunc
	start     time.Time
	reentrant bool
	unlocked  bool // guarded by h.mu
}

type levelKey struct{}

type attemptResult struct {
	ok        bool
	token     uint64
	remaining time.Duration // holder's lease when !ok
	sent      time.Time     // when the successful command was sent
}

func (c *Client) newHold(parent context.Context, key string, lc lockConfig) *hold {
	return &hold{
		c:      c,
		key:    key,
		rk:     newRedisKeys(c.cfg.prefix, key),
		owner:  c.newOwner(),
		lease:  lc.lease,
		fixed:  lc.fixed,
		parent: parent,
	}
}

// validity is how long after sending a command that set the lease the
// holder may count on it: the lease less a drift allowance of 1% + 2 ms for
// clock rate differences, as in the Redlock spec.
func (h *hold) validity() time.Duration {
	return h.lease - h.lease/100 - 2*time.Millisecond
}

// attempt tries once to take the key for a new owner.
func (h *hold) attempt(ctx context.Context) (attemptResult, error) {
	sent := time.Now()
	v, err := acquireScript.Run(ctx, h.c.rdb, []string{h.rk.lock, h.rk.fence},
		h.owner, h.lease.Milliseconds(), 1).Int64Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		if mayHaveRun(err) {
			// The command may have taken effect before the reply was lost.
			h.release(context.WithoutCancel(ctx), 0)
		}
		return attemptResult{}, fmt.Errorf("lock: acquire %q: %w", h.key, err)
	}
	if v[0] != 1 {
		return attemptResult{remaining: time.Duration(v[1]) * time.Millisecond}, nil
	}
	return attemptResult{ok: true, token: uint64(v[1]), sent: sent}, nil
}

// mayHaveRun reports whether a command that failed with err may still have
// run in Redis: not when Redis answered with an error, the client was
// closed, or no connection could be made.
func mayHaveRun(err error) bool {
	var re redis.Error
	var oe *net.OpError
	switch {
	case errors.Is(err, redis.ErrClosed), errors.As(err, &oe) && oe.Op == "dial":
		return false
	case errors.As(err, &re):
		return false
	}
	return true
}

// start makes a successful attempt the hold's first level and hands the
// lease to the watchdog.
func (h *hold) start(ctx context.Context, res attemptResult) (*level, error) {
	h.token = res.token
	h.mu.Lock()
	defer h.mu.Unlock()
	h.validUntil = res.sent.Add(h.validity())
	h.timer = time.AfterFunc(time.Until(h.validUntil), h.expire)
	if !h.c.wd.add(h, res.sent) {
		h.timer.Stop()
		h.end = ErrClosed
		h.release(ctx, 0)
		return nil, ErrClosed
	}
	return h.newLevelLocked(ctx), nil
}

// enter re-enters the hold: one more hold count in Redis.
func (h *hold) enter(ctx context.Context) (*level, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.end != nil {
		return nil, h.end
	}
	n := len(h.levels) + 1
	v, err := acquireScript.Run(ctx, h.c.rdb, []string{h.rk.lock, h.rk.fence},
		h.owner, h.lease.Milliseconds(), n).Int64Slice()
	if err == nil && len(v) != 2 {
		err = fmt.Errorf("unexpected reply %v", v)
	}
	if err != nil {
		return nil, fmt.Errorf("lock: re-enter %q: %w", h.key, err)
	}
	if v[0] != int64(n) {
		h.endLocked(ErrLost)
		return nil, ErrLost
	}
	return h.newLevelLocked(ctx), nil
}

func (h *hold) newLevelLocked(ctx context.Context) *level {
	cctx, cancel := context.WithCancelCause(ctx)
	l := &level{h: h, cancel: cancel, start: time.Now(), reentrant: len(h.levels) > 0}
	l.prev, _ = ctx.Value(levelKey{}).(*level)
	l.held = context.WithValue(cctx, levelKey{}, l)
	l.ctx = l.held
	h.levels = append(h.levels, l)
	return l
}

// unlock releases one level; it is the level's UnlockFunc.
func (l *level) unlock() error {
	h := l.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if l.unlocked {
		return ErrNotHeld
	}
	l.unlocked = true
	h.levels = slices.DeleteFunc(h.levels, func(x *level) bool { return x == l })
	n := len(h.levels)
	live := h.end == nil
	var err error
	switch h.end {
	case nil, ErrClosed:
		err = h.release(l.ctx, n)
	case ErrLost:
		if n == 0 {
			h.release(l.ctx, 0) // lets others in sooner if the key is still ours
		}
		err = ErrLost
	}
	if n == 0 {
		h.endLocked(errDone)
	}
	l.cancel(nil)
	if live {
		h.c.reportRelease(l, err)
	}
	return err
}

// release moves the owner's hold count in Redis to n, deleting the key and
// announcing the release at 0. It runs without ctx's cancellation, bounded
// by releaseTimeout.
func (h *hold) release(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	ok, err := releaseScript.Run(ctx, h.c.rdb, []string{h.rk.lock, h.rk.channel},
		h.owner, n, h.c.publish).Int64()
	if err != nil {
		return fmt.Errorf("lock: release %q: %w", h.key, err)
	}
	if ok == 0 {
		h.endLocked(ErrLost)
		return ErrLost
	}
	return nil
}

// endLocked ends the hold with cause: its lease is no longer renewed, and
// the contexts of its live levels are cancelled with cause.
func (h *hold) endLocked(cause error) {
	if h.end != nil {
		return
	}
	h.end = cause
	h.timer.Stop()
	h.c.wd.remove(h)
	for _, l := range h.levels {
		l.cancel(cause)
		h.c.reportRelease(l, cause)
	}
}

// expire runs when the validity ends without a confirmed renewal.
func (h *hold) expire() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.end != nil {
		return
	}
	if d := time.Until(h.validUntil); d > 0 {
		h.timer.Reset(d) // a renewal raced the timer
		return
	}
	h.endLocked(ErrLost)
}

// renewed records a watchdog renewal sent at sent: alive tells whether
// Redis still had the owner.
func (h *hold) renewed(sent time.Time, alive bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.end != nil {
		return
	}
	if !alive {
		h.endLocked(ErrLost)
		return
	}
	if until := sent.Add(h.validity()); until.After(h.validUntil) {
		h.validUntil = until
		h.timer.Reset(time.Until(until))
	}
}

func (c *Client) reportRelease(l *level, cause error) {
	if o := c.cfg.observer; o != nil {
		o.Released(l.ctx, Release{Key: l.h.key, Reentrant: l.reentrant, Held: time.Since(l.start), Cause: cause})
	}
}

// findLevel returns the live level of key that ctx carries, taken by c, or
// by any Client when c is nil.
func findLevel(ctx context.Context, c *Client, key string) *level {
	l, _ := ctx.Value(levelKey{}).(*level)
	for ; l != nil; l = l.prev {
		if l.h.key == key && (c == nil || l.h.c == c) && l.held.Err() == nil {
			return l
		}
	}
	return nil
}

// Held reports whether ctx holds key: it was returned by a successful
// [Client.Lock] or [Client.TryLock] of key, or derives from one, and that
// hold level was not unlocked and its lease is not known to be lost.
func Held(ctx context.Context, key string) bool {
	return findLevel(ctx, nil, key) != nil
}

// FencingToken returns the fencing token of the hold on key that ctx
// carries, and whether ctx holds key (see [Held]). Tokens strictly increase
// with every new acquisition of a key, across all Clients sharing the Redis
// and across expiries, so storage can reject writes from a stale holder.
// Re-entries share the outermost acquisition's token.
func FencingToken(ctx context.Context, key string) (uint64, bool) {
	if l := findLevel(ctx, nil, key); l != nil {
		return l.h.token, true
	}
	return 0, false
}
