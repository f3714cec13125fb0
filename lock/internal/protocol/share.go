package protocol

import (
	"strconv"
	"strings"
)

// ShareCall is one call of share.lua: Op is "a" (an attempt, or a
// re-entry to hold count N), "c" (a confirmation), "k" (a check), "r" (a
// release to hold count N) or "l" (a waiter leaving); Hold is the kind of
// hold, "p" a permit, "r" a read hold, "w" the write hold; Limit is a
// semaphore's; Wait has a failed attempt join the queue.
type ShareCall struct {
	Op, Hold string
	Limit, N int64
	Wait     bool
}

// A shared holder, as a field "=" + owner of the hash: its kind (in
// capitals while a hand-off is not confirmed), hold count, token and
// lease end (ms).
type shared struct {
	kind  string
	count string
	token string
	until int64
}

func parseShared(v string) (shared, bool) {
	f := strings.Split(v, " ")
	if len(f) != 4 {
		return shared{}, false
	}
	u, err := strconv.ParseInt(f[3], 10, 64)
	return shared{kind: f[0], count: f[1], token: f[2], until: u}, err == nil
}

func (s shared) String() string {
	return s.kind + " " + s.count + " " + s.token + " " + itoa(s.until)
}

func (s shared) writer() bool { return strings.ToLower(s.kind) == "w" }

// A stx is one run of share.lua: a tx with the live holders.
type stx struct {
	*tx
	c       ShareCall
	owner   string
	holders map[string]shared
	writer  bool
	limit   int64
	soonest int64 // the earliest lease end of a holder; 0: none
	existed bool  // the hash existed when the call began
	// lapsed are the Clients of hand-offs that lapsed unconfirmed: their
	// waiters are dropped by the first fill (see firstDropping).
	lapsed map[string]bool
}

// Share is share.lua: shared holds of a semaphore or read-write lock
// (see the script and docs/protocol.md, "Permits"), for owner, with the
// lease and linger in ms.
func (k Key) Share(env Env, owner string, c ShareCall, lease, linger int64) Step {
	t := &stx{tx: begin(k, env), c: c, owner: owner, holders: map[string]shared{}}
	return t.done(t.run(lease, linger))
}

func (t *stx) run(lease, linger int64) Reply {
	t.existed = t.k.Hash != nil
	for f, v := range t.k.Hash {
		if !strings.HasPrefix(f, "=") {
			continue
		}
		if s, ok := parseShared(v); ok && s.until >= t.now() {
			t.holders[f[1:]] = s
			t.writer = t.writer || s.writer()
			if t.soonest == 0 || s.until < t.soonest {
				t.soonest = s.until
			}
		} else {
			if c := ClientOf(f[1:]); ok && s.kind != strings.ToLower(s.kind) && c != ClientOf(t.owner) { // a hand-off lapsed: its Client is most likely dead (not the caller's)
				if t.lapsed == nil {
					t.lapsed = map[string]bool{}
				}
				t.lapsed[c] = true
			}
			delete(t.k.Hash, f)
		}
	}
	if len(t.k.Hash) == 0 {
		t.k.Hash, t.k.HashExp = nil, NoTTL
	}
	if r := t.convert(); r != nil {
		return r
	}
	me, held := t.holders[t.owner]
	switch t.c.Op {
	case "a", "c":
		if held {
			if t.c.N == 1 {
				t.keep(lease)
				me.kind, me.until = strings.ToLower(me.kind), t.now()+lease
				t.put(t.owner, me)
				return ints(1, t.tokenOf(me)) // the target, as acquire.lua
			}
			if me.count != itoa(t.c.N) {
				me.count = itoa(t.c.N)
				t.put(t.owner, me)
			}
			return ints(t.c.N, t.tokenOf(me))
		}
		if t.c.Op == "c" || t.c.N != 1 {
			return ints(-1, 0)
		}
		return t.attempt(lease)
	}
	if k := t.k.Hash["k"]; strings.HasPrefix(k, "s") {
		t.limit, _ = strconv.ParseInt(k[1:], 10, 64)
	}
	switch t.c.Op {
	case "k":
		t.fill("", t.owner)
		return ints(0, 0)
	case "r":
		if !held {
			if t.c.N == 0 && t.k.Hash["r"] == t.owner {
				return ints(1)
			}
			if t.c.N == 0 && t.unwait(t.owner) {
				t.unqueue(t.owner)
				t.fill("", t.owner)
			}
			return ints(0)
		}
		if t.c.N != 0 {
			me.count = itoa(t.c.N)
			t.put(t.owner, me)
			return ints(1)
		}
		t.drop(t.owner)
		t.setHash("r", t.owner)
		t.fill("", t.owner)
		t.settle(linger)
		return ints(1)
	}
	queued := t.unwait(t.owner) // "l"
	if queued {
		t.unqueue(t.owner)
	}
	if held {
		t.drop(t.owner)
	}
	if queued || held {
		t.fill("", t.owner)
		t.settle(linger)
		return ints(1)
	}
	return ints(0)
}

// want is the kind of key the call's hold wants: "s" and the limit, or
// "rw".
func (t *stx) want() string {
	if t.c.Hold == "p" {
		return "s" + itoa(t.c.Limit)
	}
	return "rw"
}

// convert turns a Lock's hash (acquire.lua) into a read-write lock's for
// an attempt: its holder becomes the writer (maybe the caller: then a
// re-entry); into a semaphore's only when it is free with no queue, else
// it refuses ({-3, 1}).
func (t *stx) convert() Reply {
	if t.c.Op != "a" {
		return nil
	}
	if o, ok := t.k.field("o"); ok {
		held := t.k.count() > 0
		if t.want() != "rw" && (held || t.k.flagged()) {
			return ints(-3, 1)
		}
		if held {
			// A holder the lock was handed to that has not confirmed is
			// still queued: it leaves the queue, unconfirmed.
			kind := "w"
			if t.unwait(o) {
				t.unqueue(o)
				kind = "W"
			}
			tok, _ := t.k.field("t")
			if tok == "" {
				tok = "0"
			}
			t.put(o, shared{kind: kind, count: t.k.Hash["n"], token: tok, until: t.now() + max(t.hashTTL(), 0)})
		}
		for _, f := range []string{"o", "n", "open", "open_until"} {
			delete(t.k.Hash, f)
		}
		if len(t.k.Hash) == 0 {
			t.k.Hash, t.k.HashExp = nil, NoTTL
		}
		if t.want() == "rw" {
			t.setHash("k", "rw")
			t.keep(pttl(t.k.Queue != nil, t.k.QueueExp, t.now())) // as long as the queue, if any
		}
	}
	return nil
}

// attempt is an attempt by a new owner (op "a", hold count 1).
func (t *stx) attempt(lease int64) Reply {
	want := t.want()
	if k, ok := t.k.field("k"); k != want {
		if ok && (len(t.holders) > 0 || t.k.Queue != nil) {
			switch {
			case k == "rw":
				return ints(-3, 3)
			case want == "rw":
				l, _ := strconv.ParseInt(k[1:], 10, 64)
				return ints(-3, 2, l)
			}
			l, _ := strconv.ParseInt(k[1:], 10, 64)
			return ints(-4, l)
		}
		t.setHash("k", want)
		if !t.existed {
			t.expireHash(max(lease, t.env.Claim))
		}
	}
	if t.c.Hold == "p" {
		t.limit = t.c.Limit
	}
	var take bool
	if t.k.Queue != nil {
		f := t.fill(t.owner, t.owner)
		take = f == "me" || (f == "empty" && t.fits(t.c.Hold))
		if f == "me" {
			t.unqueue(t.owner)
			t.unwait(t.owner)
		}
	} else {
		take = t.fits(t.c.Hold)
	}
	if take {
		tok := t.next()
		t.keep(lease)
		t.put(t.owner, shared{kind: t.c.Hold, count: "1", token: itoa(tok), until: t.now() + lease})
		return ints(1).with(Token, tok)
	}
	back := t.env.Claim
	if t.soonest != 0 {
		back = max(t.soonest-t.now(), 1)
	}
	if t.c.Wait {
		t.keep(max(back, 1000) + t.env.Claim) // the hash, which says the key's kind, lives as long as the queue
		pos := t.enqueue(t.owner, t.now()+max(back, 1000)+t.env.Claim, t.k.flagged())
		if t.c.Hold == "r" {
			t.setWait("~"+t.owner, 1)
		}
		return ints(0).with(Dur, back).with(Time, t.now()).with(Exact, pos)
	}
	return ints(0).with(Dur, back)
}

// next is the next fencing token, noted in the hash.
func (t *stx) next() int64 {
	last, ok := t.k.token()
	tok := t.nextToken(last, ok)
	t.setHash("t", itoa(tok))
	return tok
}

func (t *stx) tokenOf(s shared) int64 {
	v, _ := strconv.ParseInt(s.token, 10, 64)
	return v
}

// keep has the hash live at least ms more.
func (t *stx) keep(ms int64) {
	if t.hashTTL() < ms {
		t.expireHash(ms)
	}
}

func (t *stx) put(o string, s shared) {
	if _, was := t.holders[o]; !was {
		t.writer = t.writer || s.writer()
	}
	if t.soonest == 0 || s.until < t.soonest {
		t.soonest = s.until
	}
	t.holders[o] = s
	t.setHash("="+o, s.String())
}

func (t *stx) drop(o string) {
	if t.holders[o].writer() {
		t.writer = false
	}
	delete(t.holders, o)
	delete(t.k.Hash, "="+o)
}

// fits reports whether a hold of kind h has room.
func (t *stx) fits(h string) bool {
	switch h {
	case "p":
		return int64(len(t.holders)) < t.limit
	case "r":
		return !t.writer
	}
	return len(t.holders) == 0
}

func (t *stx) kindOf(o string) string {
	if t.k.Hash["k"] != "rw" {
		return "p"
	}
	if _, ok := t.k.Waits["~"+o]; ok {
		return "r"
	}
	return "w"
}

// fill hands room to the waiters at the front while they fit, stopping
// at caller: "me" when the caller's turn came and it fits, "empty" when
// no live waiter is left, "full" otherwise. After a lapsed hand-off, a
// waiter whose Client is not subscribed is dropped with its Client's
// waiters instead.
func (t *stx) fill(caller, from string) string {
	suspect := t.lapsed != nil
	for {
		o, _, _ := t.firstDropping(t.lapsed)
		t.lapsed = nil
		if o == "" {
			if t.k.flagged() {
				t.setHash("q", "0") // no queue: share.lua's common cases apply again
			}
			return "empty"
		}
		h := t.kindOf(o)
		if !t.fits(h) {
			return "full"
		}
		if o == caller {
			return "me"
		}
		if !t.hand(o, h, from) && suspect {
			t.drop(o)
			t.lapsed = map[string]bool{ClientOf(o): true}
		}
	}
}

// hand gives waiter o, first in the queue, a hold of kind h for the claim
// window with the next token, and tells it and the watchers of the
// hand-off. It reports whether o's Client is subscribed.
func (t *stx) hand(o, h, from string) bool {
	tok := t.next()
	t.keep(t.env.Claim)
	t.put(o, shared{kind: strings.ToUpper(h), count: "1", token: itoa(tok), until: t.now() + t.env.Claim})
	msg := Message{Kind: HandOff, From: from, Owner: o, Token: tok, At: t.now()}
	told := t.tell(o, msg)
	t.watch(o, msg)
	t.unqueue(o)
	t.unwait(o)
	return told
}

// settle lets a hash with no holder and no queue go after linger ms.
func (t *stx) settle(linger int64) {
	if len(t.holders) == 0 && t.k.Queue == nil {
		t.expireHash(linger)
	}
}
