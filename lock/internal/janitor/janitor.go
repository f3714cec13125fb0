// Package janitor cleans up, in the background, after lock owners that
// nobody will use, until Redis confirmed the cleanup twice.
package janitor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// janitorRetry is how often the janitor tries again to clean up after
	// owners while Redis does not confirm it.
	janitorRetry = 200 * time.Millisecond

	// settle is how long after Redis first confirmed an owner's cleanup the
	// janitor cleans up once more. A stalled Redis runs the commands its
	// connections hold as soon as it resumes, in no set order: an attempt
	// cut off by its caller's deadline may run after the first cleanup,
	// never after the second.
	settle = 250 * time.Millisecond

	// CleanupTimeout bounds one cleanup call.
	CleanupTimeout = time.Second

	// maxCleanups is how many cleanups a Janitor runs at once (see sweep).
	// One at a time, the cleanups of 200 calls cut off on a Redis whose
	// replies take 25 ms freed about 20 keys a second, the last some 10 s
	// after the calls ended; 64 at a time, all within 0.45 s
	// (TestBurstOfCutOffCallsBlocksKeysAtMostAClaimWindow).
	maxCleanups = 64
)

// A Janitor makes sure that owners nobody will use neither hold their key
// nor wait in its queue: an attempt or a wait cut short by the caller's
// deadline (its command may still run in Redis, late), an acquisition that
// reached only a minority or came too late, an unlock Redis did not
// confirm in time. It is one goroutine per Client, which runs the
// cleanups that are due together (see sweep) and retries each until
// Redis confirmed it twice, settle apart, so that such an owner
// blocks no key for longer than one claim window after Redis answers
// again. At Close it waits for the calls Close ended to hand it what they
// owe Redis (a waiter's leaving the queue), and goes on with what is
// pending (an attempt Close cut off, say) until Close's deadline, then
// stops; Close waits for it. H is an owner to clean up after (the lock's
// hold).
//
// A cleanup has parts that Redis confirms one by one: the nodes of a
// quorum. Each round of a cleanup asks the parts that have yet to confirm
// it, until all have; the second round, settle after the first, asks them
// all again.
type Janitor[H comparable] struct {
	life    context.Context  // the Client's: ends at Close
	closeBy func() time.Time // when Close returns at the latest; read once life ended
	busy    func() bool      // whether a call Close ended may still hand over a cleanup
	clean   Clean[H]

	mu      sync.Mutex
	pending map[H]*chore
	stopped bool          // Run has returned: cleanups run on their own
	kick    chan struct{} // capacity 1
}

// Parts are parts of a cleanup, one bit each: the nodes of a quorum, node
// i being bit i%64 (nodes that share a bit are asked together). One Redis
// is one part.
type Parts uint64

// All is every part.
const All = ^Parts(0)

// A Clean cleans up after h's owner on parts, under ctx: it takes the
// owner out of its key's wait queue and, with mayHold, releases its hold.
// It returns the parts that confirmed it, and whether enough of Redis did
// (the parts not asked counting as confirmed) that the owner blocks no key
// once the rest confirm too (settled).
type Clean[H comparable] func(ctx context.Context, h H, mayHold bool, parts Parts) (confirmed Parts, settled bool)

// chore is the cleanup of one abandoned owner.
type chore struct {
	mayHold   bool          // the owner may hold the key: release it, and confirm twice
	parts     Parts         // where to clean up
	left      Parts         // the parts that have yet to confirm this round
	confirmed time.Time     // when every part first confirmed it; zero before
	settled   bool          // done is closed
	done      chan struct{} // closed when Redis first settled it
}

// New returns a Janitor of the Client whose life ends at Close, which
// cleans up with clean. closeBy tells, once life ended, when Close
// returns at the latest; busy whether a call that Close ended may still
// hand over a cleanup.
func New[H comparable](life context.Context, clean Clean[H], closeBy func() time.Time, busy func() bool) *Janitor[H] {
	return &Janitor[H]{life: life, clean: clean, closeBy: closeBy, busy: busy,
		pending: make(map[H]*chore), kick: make(chan struct{}, 1)}
}

// Abandon hands h's owner to the janitor and waits up to wait for Redis to
// confirm the first cleanup, so that in the common case the caller returns
// with the key and queue already cleaned. mayHold tells that the owner may
// hold the key, or come to hold it when a command still under way runs;
// otherwise it is only taken out of the wait queue.
func (j *Janitor[H]) Abandon(h H, mayHold bool, wait time.Duration) {
	ch := j.add(h, mayHold, All, false)
	if ch == nil || wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ch.done:
	case <-t.C:
	case <-j.life.Done():
	}
}

// Owe hands over the release of h's owner on parts, which did not confirm
// a release that enough of Redis did (the owner blocks no key): a part
// silent then may still run a late command that takes the key for the
// owner, and keep it for a whole lease. The janitor releases it there
// until those parts confirmed twice.
func (j *Janitor[H]) Owe(h H, parts Parts) {
	j.add(h, true, parts, true)
}

// add records a cleanup of h's owner on parts, settled already or not, and
// kicks the janitor; it returns the chore, or nil once the janitor
// stopped (the cleanup then runs once on its own). A chore given new
// parts starts its rounds again.
func (j *Janitor[H]) add(h H, mayHold bool, parts Parts, settled bool) *chore {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		go j.cleanOnce(h, mayHold, parts)
		return nil
	}
	ch := j.pending[h]
	if ch == nil {
		ch = &chore{done: make(chan struct{})}
		j.pending[h] = ch
	}
	ch.mayHold = ch.mayHold || mayHold
	if ch.left|parts != ch.left {
		ch.parts |= parts
		ch.left |= parts
		ch.confirmed = time.Time{}
	}
	if settled {
		ch.settle()
	}
	j.mu.Unlock()
	j.Kick()
	return ch
}

// settle closes done, once.
func (ch *chore) settle() {
	if !ch.settled {
		ch.settled = true
		close(ch.done)
	}
}

// Kick has the janitor look at what is pending now: the last call that
// Close ended calls it, once it handed over its cleanup.
func (j *Janitor[H]) Kick() {
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// Run cleans up until Close's deadline, or until the Client is closed and
// nothing is left to clean nor still to be handed over.
func (j *Janitor[H]) Run() {
	defer j.stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	life := j.life.Done()
	var closing <-chan time.Time
	for {
		select {
		case <-life:
			life = nil
			t := time.NewTimer(time.Until(j.closeBy()))
			defer t.Stop()
			closing = t.C
		case <-closing:
			return
		case <-j.kick:
		case <-retry.C:
		}
		if j.sweep() {
			retry.Reset(janitorRetry)
		} else if life == nil && !j.busy() {
			return // closed, nothing left, and no call that Close ended still to hand over its cleanup
		}
	}
}

// stop hands what is still pending, and what comes later (an acquisition
// Close could not cut off, finishing after it), to cleanOnce.
func (j *Janitor[H]) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	for h, ch := range j.pending {
		if ch.confirmed.IsZero() {
			go j.cleanOnce(h, ch.mayHold, ch.left)
		}
	}
	clear(j.pending)
}

// cleanOnce is a cleanup after the janitor stopped: one try, bounded by
// CleanupTimeout and the Redis client's own timeouts; if it fails, a key
// the owner may hold lapses with its lease.
func (j *Janitor[H]) cleanOnce(h H, mayHold bool, parts Parts) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(j.life), CleanupTimeout)
	defer cancel()
	j.clean(ctx, h, mayHold, parts)
}

// sweep runs the cleanups that are due and reports whether any is left.
// The first runs alone: when Redis does not settle it, the others would
// wait for the same Redis, and wait for the next sweep instead. The rest
// run together, up to maxCleanups at once, so that their calls share
// round trips as the calls they clean up after did; none starts once one
// was not settled. A cleanup settled but not confirmed by every part (a
// node of a quorum silent) does not hold up the others.
func (j *Janitor[H]) sweep() bool {
	j.mu.Lock()
	due := make([]H, 0, len(j.pending))
	for h, ch := range j.pending {
		if ch.confirmed.IsZero() || time.Since(ch.confirmed) >= settle {
			due = append(due, h)
		}
	}
	j.mu.Unlock()
	if len(due) > 0 && j.cleanUp(due[0]) {
		var wg sync.WaitGroup
		var failed atomic.Bool
		slots := make(chan struct{}, maxCleanups)
		for _, h := range due[1:] {
			slots <- struct{}{}
			if failed.Load() {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if !j.cleanUp(h) {
					failed.Store(true)
				}
				<-slots
			}()
		}
		wg.Wait()
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) > 0
}

// cleanUp runs the pending cleanup of h's owner on the parts that have
// yet to confirm this round and records their confirmations; it reports
// whether Redis settled it.
func (j *Janitor[H]) cleanUp(h H) bool {
	j.mu.Lock()
	ch := j.pending[h]
	mayHold, left := ch.mayHold, ch.left
	j.mu.Unlock()
	deadline := time.Now().Add(CleanupTimeout)
	if j.life.Err() != nil {
		deadline = j.closeBy()
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(j.life), deadline)
	confirmed, settled := j.clean(ctx, h, mayHold, left)
	cancel()
	j.mu.Lock()
	defer j.mu.Unlock()
	if settled {
		ch.settle()
	}
	ch.left &^= confirmed
	switch {
	case ch.left != 0 || j.pending[h] != ch:
	case ch.confirmed.IsZero():
		ch.confirmed = time.Now()
		ch.left = ch.parts
		if !ch.mayHold {
			delete(j.pending, h)
		}
	case time.Since(ch.confirmed) >= settle:
		delete(j.pending, h)
	}
	return settled
}
