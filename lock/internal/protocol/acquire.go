package protocol

// Mode is what an acquire.lua call is for.
type Mode int

const (
	// Try is one attempt (TryLock, and Lock's re-entries).
	Try Mode = iota
	// Wait is an attempt whose failure joins the queue (Lock).
	Wait
	// Confirm sets the lease of an owner the lock was handed to; it never
	// takes the lock.
	Confirm
	// Check drops waiters that missed their turn and reports when the
	// first waiter's turn or place ends; it never takes the lock.
	Check
	// Watch has every Client with a queued waiter told of an unconfirmed
	// hand-off (a Client that closes will not check it); it never takes
	// the lock.
	Watch
)

// Acquire is acquire.lua: it moves owner's hold count to n (1: take the
// lock, or confirm it when handed) in the given mode, with the lease in
// ms.
//
// Replies: {count, token} when owner holds it at count n; {0, ms} when
// another owner holds it ({0, ms, now, place} in Wait mode); {-2, ms} when
// it is free but another waiter's turn (likewise in Wait mode); {-1, 0}
// when owner's hold is gone (n > 1 or Confirm); {0, ms until the first
// waiter's turn or place ends} for Check; {0, 0} for Watch.
//
// On the hash of shared holds (see [Key.Share]) it changes nothing and
// replies {-3, 0}: the caller runs share.lua instead.
func (k Key) Acquire(env Env, owner string, lease int64, n int64, mode Mode) Step {
	t := begin(k, env)
	if t.shared() {
		return t.done(ints(-3, 0))
	}
	return t.done(t.acquire(owner, lease, n, mode))
}

// shared reports whether the hash is one of shared holds (share.lua's k).
func (t *tx) shared() bool {
	_, ok := t.k.Hash["k"]
	return ok
}

// Check is Acquire in Check mode by a fresh owner, as the lock package
// runs it.
func (k Key) Check(env Env, owner string, lease int64) Step {
	return k.Acquire(env, owner, lease, 1, Check)
}

func (t *tx) acquire(owner string, lease, n int64, mode Mode) Reply {
	flagged := t.k.flagged()
	last, hasToken := t.k.token()
	h, holds := t.k.holder(owner)

	// The common cases, before queue.lua's helpers: the owner in place
	// with no queue, and a free hash left by a release with no queue.
	if holds && !flagged {
		return t.stay(h, lease, n, false)
	}
	_, hasOwner := t.k.field("o")
	if !t.k.full() && hasOwner && hasToken && !flagged && n == 1 && (mode == Try || mode == Wait) {
		return t.take(owner, lease, last+1, "")
	}

	if mode == Watch {
		if t.unconfirmed() {
			o := t.k.owner()
			tok, _ := t.k.token()
			t.tellQueue(Message{Kind: HandOff, From: owner, Owner: o, Token: tok, At: t.now()}, ClientOf(o))
		}
		return ints(0, 0)
	}
	claim := t.env.Claim
	waits := claim > 0 && mode == Wait
	onlyMine := n > 1 || mode == Confirm
	if t.k.full() { // held, or handed (see Key.State)
		if holds {
			return t.stay(h, lease, n, flagged)
		}
		if onlyMine {
			return ints(-1, 0)
		}
		if mode == Check {
			return ints(0, 0) // taken: nothing left to check
		}
		left := t.hashTTL()
		if waits {
			pos := t.enqueue(owner, t.now()+max(left, 1000)+claim, flagged)
			return Reply{}.with(Exact, 0).with(Dur, left).with(Time, t.now()).with(Exact, pos)
		}
		return Reply{}.with(Exact, 0).with(Dur, left)
	}
	if onlyMine {
		return ints(-1, 0)
	}
	// Free. A queue may exist only if the hash flags one or is gone.
	queued := claim > 0 && (flagged || !hasOwner) && t.k.Queue != nil
	if queued {
		o, d, _ := t.nextTurn(owner)
		if mode == Check {
			if o == "" {
				return ints(0, 0)
			}
			return Reply{}.with(Exact, 0).with(Dur, max(d-t.now(), 0))
		}
		at := t.k.num("open")
		isOpen := at > 0 && t.now() < t.k.num("open_until")
		switch {
		case o == owner || (o != "" && isOpen && at <= t.now()):
			t.unqueue(owner)
			t.unwait(owner)
			if at > 0 {
				delete(t.k.Hash, "open")
				delete(t.k.Hash, "open_until")
			}
		case o != "":
			back := d - t.now()
			if isOpen && at > t.now() {
				back = at - t.now() // come back when the turn opens
			}
			if waits {
				pos := t.enqueue(owner, d+claim, true)
				return Reply{}.with(Exact, -2).with(Dur, back).with(Time, t.now()).with(Exact, pos)
			}
			return Reply{}.with(Exact, -2).with(Dur, back)
		}
	}
	if mode == Check {
		return ints(0, 0)
	}
	// The queue flag stays while a queue may exist, and goes with it.
	q := ""
	switch {
	case queued:
		q = "1"
	case flagged:
		q = "0"
	}
	return t.take(owner, lease, t.nextToken(last, hasToken), q)
}

// stay is an acquisition by holder h: a re-entry (n > 1) sets
// the count, an acquisition or confirmation (n = 1) sets the lease from
// now and, with a queue flagged, takes the owner out of the queue.
func (t *tx) stay(h Holder, lease, n int64, flagged bool) Reply {
	if n == 1 {
		t.expireHash(lease)
		if flagged {
			t.leaveQueue(h.Owner)
		}
	} else if h.Count != n {
		t.setHash("n", itoa(n))
	}
	return Reply{}.with(Exact, n).with(Token, h.Token)
}

// take writes owner as the holder with tok and the lease, and the queue
// flag q unless it is "".
func (t *tx) take(owner string, lease, tok int64, q string) Reply {
	fv := []string{"o", owner, "n", "1", "t", itoa(tok)}
	if q != "" {
		fv = append(fv, "q", q)
	}
	t.setHash(fv...)
	t.expireHash(lease)
	return Reply{}.with(Exact, 1).with(Token, tok)
}

// unconfirmed reports whether the lock was handed to an owner that has
// not confirmed yet (it is still in the waits hash).
func (t *tx) unconfirmed() bool {
	return t.k.full() && t.k.waiting(t.k.owner())
}
