package protocol

// Release is release.lua: it moves owner's hold count to n; at 0 the lock
// goes to the first live queued waiter (a hand-off) or is marked free,
// its hash kept for linger ms.
//
// Replies: {1} when owner's count is at n; {1, waiter, token, now} when
// the lock was handed to waiter; {0} when owner's hold is gone. A retried
// final release that finds owner noted as the last to release replies
// {1}, or {1, holder, token, 0} while the owner it handed the lock to
// holds it.
// On the hash of shared holds it changes nothing and replies {-3}.
func (k Key) Release(env Env, owner string, n, linger int64) Step {
	t := begin(k, env)
	if t.shared() {
		return t.done(ints(-3))
	}
	return t.done(t.release(owner, n, linger))
}

func (t *tx) release(owner string, n, linger int64) Reply {
	_, holds := t.k.holder(owner)
	claim := t.env.Claim
	if holds && n > 0 {
		t.setHash("n", itoa(n))
		return ints(1)
	}
	if holds && !t.k.flagged() && claim != 0 {
		t.expireHash(linger)
		t.setHash("n", "0", "r", owner)
		return ints(1)
	}
	if !holds {
		if n == 0 && t.k.Hash["r"] == owner {
			if hs := t.k.Holders(); len(hs) > 0 {
				return ints(1).str(hs[0].Owner).with(Token, hs[0].Token).with(Exact, 0)
			}
			return ints(1)
		}
		if n == 0 {
			t.lostRelease(owner, !t.k.full())
		}
		return ints(0)
	}
	if claim == 0 {
		t.letGo(owner, linger)
		t.msgs = append(t.msgs, Message{Kind: Released, From: owner})
		return ints(1)
	}
	t.leaveQueue(owner) // handed the lock, still first in the queue
	if o, tok := t.handOff(owner, false, true); o != "" {
		return ints(1).str(o).with(Token, tok).with(Time, t.now())
	}
	t.letGo(owner, linger)
	return ints(1)
}

// lostRelease is the final release of owner, which was handed the lock
// and lost it unconfirmed: it stops waiting and, if it was the first
// waiter and the key is free, the key passes on as when a waiter leaves;
// r keeps naming the last owner that released the key in full.
func (t *tx) lostRelease(owner string, free bool) {
	r, hadR := t.k.field("r")
	if _, head := t.stopWaiting(owner); !head || !free {
		return
	}
	if o, _ := t.handOff(owner, true, false); o == "" {
		return
	}
	if hadR {
		t.k.Hash["r"] = r
	} else {
		delete(t.k.Hash, "r")
	}
}

// Leave is leave.lua: waiter owner stopped waiting. If the lock was
// handed to it, or the free lock's turn was its own, the lock goes to the
// next waiter at once (told to every Client with a queued waiter);
// another waiter's turn is left as it is. While the lock is handed to
// another waiter that has not confirmed, that hand-off's watchers are
// told again; while it is free, waiters that missed their turns are
// dropped (see nextTurn). Replies {1} when owner was queued or held the
// lock, else {0}.
// On the hash of shared holds it changes nothing and replies {-3}.
func (k Key) Leave(env Env, owner string, linger int64) Step {
	t := begin(k, env)
	if t.shared() {
		return t.done(ints(-3))
	}
	return t.done(t.leave(owner, linger))
}

func (t *tx) leave(owner string, linger int64) Reply {
	queued, head := t.stopWaiting(owner)
	_, holds := t.k.holder(owner)
	switch {
	case holds || (head && !t.k.full()):
		if o, _ := t.handOff(owner, true, false); o == "" && holds {
			t.letGo(owner, linger)
		}
	case queued && t.k.full():
		if t.unconfirmed() {
			o := t.k.owner()
			tok, _ := t.k.token()
			t.watch(o, Message{Kind: HandOff, From: owner, Owner: o, Token: tok, At: t.now()})
		}
	case queued:
		t.nextTurn(owner)
	}
	if queued || holds {
		return ints(1)
	}
	return ints(0)
}

// Force is force.lua: it ends the hold of whoever holds the lock (only of
// expect unless it is ""), for ForceUnlock by owner by. The lock goes to
// the first live waiter, the hand-off told to every Client with a queued
// waiter, or is marked free, its hash kept for linger ms; r becomes
// "!"+by. Replies {0} when no one held it, {2, holder} when holder is not
// expect, else {1, old owner, its token} and, after a hand-off, the
// waiter and its token.
func (k Key) Force(env Env, by, expect string, linger int64) Step {
	t := begin(k, env)
	return t.done(t.force(by, expect, linger))
}

func (t *tx) force(by, expect string, linger int64) Reply {
	if len(t.k.Holders()) == 0 {
		return ints(0)
	}
	old := t.k.owner()
	if expect != "" && old != expect {
		return ints(2).str(old)
	}
	from := "!" + by
	tok, _ := t.k.token()
	r := ints(1).str(old).with(Token, tok)
	t.leaveQueue(old) // a waiter the lock was handed to
	if t.env.Claim > 0 && t.k.flagged() && t.k.Queue != nil {
		if o, next := t.handOff(from, true, false); o != "" {
			return r.str(o).with(Token, next)
		}
	}
	t.letGo(from, linger)
	if t.env.Claim == 0 {
		t.msgs = append(t.msgs, Message{Kind: Released, From: from})
	}
	return r
}

// Renew is renew.lua for one key: it sets the lease (ms) from now while
// owner holds the lock, and never takes it. Replies {1} or {0}.
// A shared holder (see [Key.Share]) whose lease has not ended gets its
// lease end set from now; the hash lives at least the lease.
func (k Key) Renew(env Env, owner string, lease int64) Step {
	t := begin(k, env)
	if _, ok := t.k.holder(owner); ok {
		t.expireHash(lease)
		return t.done(ints(1))
	}
	if s, ok := parseShared(t.k.Hash["="+owner]); ok && s.until >= t.now() {
		if t.hashTTL() < lease {
			t.expireHash(lease)
		}
		s.until = t.now() + lease
		t.setHash("="+owner, s.String())
		return t.done(ints(1))
	}
	return t.done(ints(0))
}

// stopWaiting takes owner out of the queue and reports whether it was
// queued and whether it was first.
func (t *tx) stopWaiting(owner string) (queued, head bool) {
	queued = t.unwait(owner)
	if queued {
		head = len(t.k.Queue) > 0 && t.k.Queue[0] == owner
		t.unqueue(owner)
	}
	return queued, head
}

// Lapse is time passing until now: the Redis keys whose TTL ran out are
// gone (see Key.At). Deadlines and turns that passed change nothing in
// the data: the next call that looks acts on them (see Key.State).
func (k Key) Lapse(now int64) Step { return Step{Next: k.At(now)} }
