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
// all again. A release a majority confirmed but a silent node did not is
// owed to that node (see Owe): asked until the node confirmed it twice or
// for a lease at most, and not waited for at Close.
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
	abandoned bool          // handed over by Abandon: cleaned until confirmed
	owedUntil time.Time     // otherwise (Owe), when the janitor stops asking silent parts
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
	ch := j.add(h, mayHold, All, time.Time{})
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
// until those parts confirmed twice, or until until (the lease from now:
// a part silent for that long may be gone for good, and the janitor must
// not ask it for ever for every release it missed); then the key lapses
// there with that lease. At Close it does not wait for such cleanups.
func (j *Janitor[H]) Owe(h H, parts Parts, until time.Time) {
	j.add(h, true, parts, until)
}

// add records a cleanup of h's owner on parts, settled already (owed
// until a time) or not (abandoned: zero), and kicks the janitor; it
// returns the chore, or nil once the janitor stopped (the cleanup then
// runs once on its own). A chore given new parts starts its rounds again.
func (j *Janitor[H]) add(h H, mayHold bool, parts Parts, owedUntil time.Time) *chore {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		if owedUntil.IsZero() { // what was owed lapses with its lease
			go j.cleanOnce(h, mayHold, parts)
		}
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
	if owedUntil.IsZero() {
		ch.abandoned = true
	} else {
		ch.settle()
		ch.owedUntil = maxTime(ch.owedUntil, owedUntil)
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
// nothing is left to clean but what was owed (see Owe), nor still to be
// handed over.
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
		// Closed, nothing abandoned left, and no call that Close ended
		// still to hand over its cleanup: done.
		done := func() bool { return life == nil && !j.busy() && !j.abandonedLeft() }
		if done() {
			return
		}
		more := j.sweep()
		if done() {
			return
		}
		if more {
			retry.Reset(janitorRetry)
		}
	}
}

// abandonedLeft reports whether a cleanup handed over by Abandon is
// pending.
func (j *Janitor[H]) abandonedLeft() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, ch := range j.pending {
		if ch.abandoned {
			return true
		}
	}
	return false
}

// stop hands what was abandoned and is still unconfirmed, and what comes
// later (an acquisition Close could not cut off, finishing after it), to
// cleanOnce; what was owed to silent parts lapses there with its lease.
func (j *Janitor[H]) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	for h, ch := range j.pending {
		if ch.abandoned && ch.confirmed.IsZero() {
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
// Those Redis has yet to settle come first: the first runs alone, since
// when Redis does not settle it the others would wait for the same Redis,
// and wait for the next sweep instead; the rest run together, up to
// maxCleanups at once, so that their calls share round trips as the calls
// they clean up after did, and none starts once one was not settled. Then
// those settled but waiting for parts (nodes of a quorum) that have yet to
// confirm, grouped by those parts, likewise: the first of a group runs
// alone, and the rest only if a part confirmed it. So while a node is
// silent, a sweep asks it once, however many cleanups wait for it.
func (j *Janitor[H]) sweep() bool {
	j.mu.Lock()
	var unsettled []H
	waiting := make(map[Parts][]H)
	now := time.Now()
	for h, ch := range j.pending {
		switch {
		case !ch.abandoned && now.After(ch.owedUntil):
			delete(j.pending, h) // owed to parts silent for a lease: the key lapses there
		case !ch.confirmed.IsZero() && now.Sub(ch.confirmed) < settle:
		case ch.settled:
			waiting[ch.left] = append(waiting[ch.left], h)
		default:
			unsettled = append(unsettled, h)
		}
	}
	j.mu.Unlock()
	j.cleanUpAll(unsettled, func(_ Parts, settled bool) bool { return settled })
	for left, hs := range waiting {
		j.cleanUpAll(hs, func(confirmed Parts, _ bool) bool { return confirmed&left != 0 })
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.pending) > 0
}

// cleanUpAll runs the cleanups of hs: the first alone, and the rest, up
// to maxCleanups at once, if ok says the first went well; none starts
// once one did not.
func (j *Janitor[H]) cleanUpAll(hs []H, ok func(confirmed Parts, settled bool) bool) {
	if len(hs) == 0 || !ok(j.cleanUp(hs[0])) {
		return
	}
	var wg sync.WaitGroup
	var failed atomic.Bool
	slots := make(chan struct{}, maxCleanups)
	for _, h := range hs[1:] {
		slots <- struct{}{}
		if failed.Load() {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !ok(j.cleanUp(h)) {
				failed.Store(true)
			}
			<-slots
		}()
	}
	wg.Wait()
}

// cleanUp runs the pending cleanup of h's owner on the parts that have
// yet to confirm this round and records their confirmations; it returns
// the parts that confirmed it and whether Redis settled it.
func (j *Janitor[H]) cleanUp(h H) (Parts, bool) {
	j.mu.Lock()
	ch := j.pending[h]
	mayHold, left, abandoned := ch.mayHold, ch.left, ch.abandoned
	j.mu.Unlock()
	deadline := time.Now().Add(CleanupTimeout)
	if j.life.Err() != nil {
		deadline = j.closeBy()
	}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(j.life), deadline)
	if !abandoned {
		defer context.AfterFunc(j.life, cancel)() // Close does not wait for what was owed
	}
	confirmed, settled := j.clean(ctx, h, mayHold, left)
	cancel()
	j.mu.Lock()
	defer j.mu.Unlock()
	if settled {
		ch.settle()
	}
	ch.left &^= confirmed
	switch {
	case j.pending[h] != ch:
	case ch.left != 0:
	case ch.confirmed.IsZero():
		ch.confirmed = time.Now()
		ch.left = ch.parts
		if !ch.mayHold {
			delete(j.pending, h)
		}
	case time.Since(ch.confirmed) >= settle:
		delete(j.pending, h)
	}
	return confirmed & left, settled
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
