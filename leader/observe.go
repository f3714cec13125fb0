package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// An Inspector reads a lock's state from Redis; [lock.Client] is one.
type Inspector interface {
	Inspect(ctx context.Context, key string) (lock.LockInfo, error)
}

// Info is who leads an election, as Redis has it: the holder of the
// election's lock. For a moment after a hand-over that may be a replica
// whose campaign has not returned yet, whose lead has not started, or
// never starts (a replica that Redis handed the lock to but that did not
// take it in time, after a stall: the lock then goes to the next one,
// with a greater token). [Election.IsLeader] is the leader's own view.
type Info struct {
	// Led tells that a leader holds the election's lock.
	Led bool
	// Leader is its owner: its label ([lock.WithOwnerLabel]), host and
	// process id. Token is the fencing token of its term, and Lease the
	// time left of its lease.
	Leader lock.Owner
	Token  uint64
	Lease  time.Duration
}

// same reports whether i and j name the same term.
func (i Info) same(j Info) bool {
	return i.Led == j.Led && i.Leader.ID == j.Leader.ID && i.Token == j.Token
}

// Current returns who leads election name now, in one Redis call. Its
// error is the Inspector's, or one matching [lock.ErrInvalid] for a nil
// Inspector (a nil *lock.Client too) or an empty name.
func Current(ctx context.Context, in Inspector, name string) (Info, error) {
	if isNil(in) {
		return Info{}, fmt.Errorf("%w: leader: nil inspector", lock.ErrInvalid)
	}
	if name == "" {
		return Info{}, fmt.Errorf("%w: leader: empty election name", lock.ErrInvalid)
	}
	li, err := in.Inspect(ctx, Key(name))
	if err != nil {
		return Info{}, err
	}
	if !li.Held {
		return Info{}, nil
	}
	return Info{Led: true, Leader: li.Holder, Token: li.Token, Lease: li.RemainingLease}, nil
}

// DefaultObserveEvery is how often [Observe] reads who leads.
const DefaultObserveEvery = time.Second

// Observe reads who leads election name every interval (0 or less:
// [DefaultObserveEvery]) until ctx ends, and sends the first answer and
// then every change of term (another leader, another token, or none) on
// the channel it returns, which it closes when ctx ends, or when a
// reading fails with an error matching [lock.ErrClosed] (the Client was
// closed) or [lock.ErrInvalid] (a nil Inspector or an empty name, see
// [Current]): no later reading could succeed, and for bad arguments the
// channel closes without a value. A
// reading may take up to interval or 1 s, whichever is longer, and a slow
// one delays the next; one that fails (Redis unreachable, or slower than
// that) is skipped: the last value sent stands. A receiver that falls
// behind gets the latest term, not every one.
func Observe(ctx context.Context, in Inspector, name string, interval time.Duration) <-chan Info {
	if interval <= 0 {
		interval = DefaultObserveEvery
	}
	ch := make(chan Info, 1)
	go func() {
		defer close(ch)
		t := time.NewTicker(interval)
		defer t.Stop()
		var last Info
		first := true
		for {
			rctx, cancel := context.WithTimeout(ctx, max(interval, DefaultObserveEvery))
			info, err := Current(rctx, in, name)
			cancel()
			if errors.Is(err, lock.ErrClosed) || errors.Is(err, lock.ErrInvalid) {
				return // no later reading can succeed
			}
			if err == nil && (first || !info.same(last)) {
				first, last = false, info
				select { // the receiver gets the latest term
				case <-ch:
				default:
				}
				ch <- info
			}
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
