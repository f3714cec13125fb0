package protocol

import (
	"slices"
	"strconv"
)

// A tx is one script run: the data it changes, the moment and the
// messages published so far. Its methods are the helpers of queue.lua.
type tx struct {
	k    Key
	env  Env
	msgs []Message
}

func begin(k Key, env Env) *tx { return &tx{k: k.At(env.Now), env: env} }

func (t *tx) done(r Reply) Step { return Step{Next: t.k, Reply: r, Msgs: t.msgs} }

func (t *tx) now() int64 { return t.env.Now }

// setHash is HSET on the lock hash: it creates the hash, without a TTL,
// when missing.
func (t *tx) setHash(fv ...string) {
	if t.k.Hash == nil {
		t.k.Hash, t.k.HashExp = map[string]string{}, NoTTL
	}
	for i := 0; i < len(fv); i += 2 {
		t.k.Hash[fv[i]] = fv[i+1]
	}
}

// expireHash is PEXPIRE on the lock hash; it reports whether the hash
// existed.
func (t *tx) expireHash(ttl int64) bool {
	if t.k.Hash == nil {
		return false
	}
	if ttl <= 0 {
		t.k.Hash, t.k.HashExp = nil, NoTTL
		return true
	}
	t.k.HashExp = t.now() + ttl
	return true
}

func (t *tx) hashTTL() int64 { return pttl(t.k.Hash != nil, t.k.HashExp, t.now()) }

func (t *tx) waitsTTL() int64 { return pttl(t.k.Waits != nil, t.k.WaitsExp, t.now()) }

// expireQueue is PEXPIRE on both queue keys (each only if it exists).
func (t *tx) expireQueue(ttl int64) {
	if t.k.Waits != nil {
		t.k.WaitsExp = t.now() + ttl
	}
	if t.k.Queue != nil {
		t.k.QueueExp = t.now() + ttl
	}
}

// setWait is HSET on the waits hash; it reports whether f is new.
func (t *tx) setWait(f string, v int64) bool {
	if t.k.Waits == nil {
		t.k.Waits, t.k.WaitsExp = map[string]int64{}, NoTTL
	}
	_, had := t.k.Waits[f]
	t.k.Waits[f] = v
	return !had
}

// unwait takes o out of the waits hash (deadline and join time) and
// reports whether it was there; the caller takes it out of the queue.
func (t *tx) unwait(o string) bool {
	_, had := t.k.Waits[o]
	_, joined := t.k.Waits[">"+o]
	_, reader := t.k.Waits["~"+o]
	delete(t.k.Waits, o)
	delete(t.k.Waits, ">"+o)
	delete(t.k.Waits, "~"+o)
	if len(t.k.Waits) == 0 {
		t.k.Waits, t.k.WaitsExp = nil, NoTTL
	}
	return had || joined || reader
}

// unqueue is LREM queue 1 o.
func (t *tx) unqueue(o string) {
	if i := slices.Index(t.k.Queue, o); i >= 0 {
		t.k.Queue = slices.Delete(t.k.Queue, i, i+1)
	}
	if len(t.k.Queue) == 0 {
		t.k.Queue, t.k.QueueExp = nil, NoTTL
	}
}

// leaveQueue takes o out of both queue keys and reports whether it was
// waiting.
func (t *tx) leaveQueue(o string) bool {
	if !t.unwait(o) {
		return false
	}
	t.unqueue(o)
	return true
}

// deadline is o's deadline in the waits hash (0 when missing).
func (t *tx) deadline(o string) int64 { return t.k.Waits[o] }

// nextToken is the token after the hash's last one, or Redis's clock in
// µs when the hash had none.
func (t *tx) nextToken(last int64, ok bool) int64 {
	if ok {
		return last + 1
	}
	return t.env.micros()
}

// tell publishes m to the Client of owner o and reports whether a
// subscriber received it.
func (t *tx) tell(o string, m Message) bool {
	m.Client = ClientOf(o)
	t.msgs = append(t.msgs, m)
	return t.env.Subscribed != nil && t.env.Subscribed(m.Client)
}

// tellQueue publishes m to every Client with a queued waiter, once each,
// in queue order, but the Client skip ("": none).
func (t *tx) tellQueue(m Message, skip string) {
	told := map[string]bool{}
	if skip != "" {
		told[skip] = true
	}
	for _, w := range t.k.Queue {
		if c := ClientOf(w); !told[c] {
			told[c] = true
			t.tell(w, m)
		}
	}
}

// first drops the waiters at the front whose place ended, with every
// other waiter of their Clients (one missed its turn: its process is most
// likely dead), and returns the first live waiter ("" when none), its
// deadline and whether any was dropped.
func (t *tx) first() (string, int64, bool) { return t.firstDropping(nil) }

// firstDropping is first, lapsed naming Clients known to be dead already
// (see [Key.Share]: a hand-off of theirs lapsed), whose waiters go too.
func (t *tx) firstDropping(lapsed map[string]bool) (string, int64, bool) {
	dead := map[string]bool{}
	for c := range lapsed {
		dead[c] = true
	}
	for len(t.k.Queue) > 0 {
		o := t.k.Queue[0]
		d := t.deadline(o)
		if d > t.now() && !dead[ClientOf(o)] {
			break
		}
		dead[ClientOf(o)] = true
		t.unqueue(o)
		t.unwait(o)
	}
	if len(dead) == 0 {
		return t.head()
	}
	if t.k.Queue != nil {
		keep := t.k.Queue[:0:0]
		for _, w := range t.k.Queue {
			if dead[ClientOf(w)] {
				t.unwait(w)
			} else {
				keep = append(keep, w)
			}
		}
		t.k.Queue = keep // the queue's TTL stays
		if len(keep) == 0 {
			t.k.Queue, t.k.QueueExp = nil, NoTTL
		}
	}
	o, d, _ := t.head()
	return o, d, true
}

func (t *tx) head() (string, int64, bool) {
	if len(t.k.Queue) == 0 {
		return "", 0, false
	}
	return t.k.Queue[0], t.deadline(t.k.Queue[0]), false
}

// writeLock sets fields of the lock hash and gives it a TTL of ttl ms.
func (t *tx) writeLock(ttl int64, fv ...string) {
	t.setHash(fv...)
	t.expireHash(ttl)
}

// letGo marks the lock free after owner's last release, with no waiter
// left, and keeps the hash for linger ms.
func (t *tx) letGo(owner string, linger int64) {
	t.writeLock(linger, "n", "0", "r", owner, "q", "0")
}

// enqueue puts owner at the back of the queue unless it is in it, with
// the deadline, keeps both queue keys until the latest deadline, and
// flags the queue in the hash unless flagged. It returns owner's place (1
// first) when it adds it, else 0.
func (t *tx) enqueue(owner string, deadline int64, flagged bool) int64 {
	var pos int64
	if t.setWait(owner, deadline) {
		t.k.Queue = append(t.k.Queue, owner)
		if len(t.k.Queue) == 1 {
			t.k.QueueExp = NoTTL
		}
		pos = int64(len(t.k.Queue))
		t.setWait(">"+owner, t.now())
	}
	ttl := deadline - t.now()
	if t.waitsTTL() < ttl {
		t.expireQueue(ttl)
	}
	if !flagged {
		t.setHash("q", "1")
		if t.hashTTL() < 0 {
			t.expireHash(ttl)
		}
	}
	return pos
}

// announce starts owner o's turn after waiters before it missed theirs
// and tells every Client with a queued waiter; from is the caller. It
// returns the turn's end.
func (t *tx) announce(o, from string) int64 {
	d := t.now() + t.env.Claim
	t.setWait(o, d)
	t.tellQueue(Message{Kind: Turn, From: from, Owner: o}, "")
	return d
}

// nextTurn drops the waiters at the front that missed their turns (see
// first) and, if any was, starts the turn of the first live one (see
// announce), open to any queued waiter from a tenth of the window on.
// It returns the first live waiter, its deadline and whether any was
// dropped.
func (t *tx) nextTurn(from string) (string, int64, bool) {
	o, d, dropped := t.first()
	if dropped && o != "" {
		d = t.announce(o, from)
		claim := t.env.Claim
		t.setHash("open", itoa(t.now()+claim/10), "open_until", itoa(d), "q", "1")
		if t.hashTTL() < claim {
			t.expireHash(claim)
		}
	}
	return o, d, dropped
}

// handOff gives the free lock to the first live waiter, if any, for the
// claim window and tells it; from is the owner that let go of it. With
// all set every other Client with a queued waiter is told too, else the
// watchers (see [Watchers]); with replied set a waiter of from's Client
// is not told (the caller's reply tells it). It returns the waiter ("":
// none) and its token.
func (t *tx) handOff(from string, all, replied bool) (string, int64) {
	o, d, _ := t.head()
	if o == "" || d <= t.now() {
		o, d, _ = t.first()
	}
	if o == "" {
		return "", 0
	}
	last, ok := t.k.token()
	tok := t.nextToken(last, ok)
	claim := t.env.Claim
	t.writeLock(claim, "o", o, "n", "1", "t", itoa(tok), "r", from, "q", "1", "open", "0")
	msg := Message{Kind: HandOff, From: from, Owner: o, Token: tok, At: t.now()}
	keep := claim
	if !(replied && ClientOf(o) == ClientOf(from)) && t.tell(o, msg) {
		keep = claim + claim/2
	}
	t.setWait(o, t.now()+keep)
	if d <= t.now()+keep+1 {
		if ttl := t.waitsTTL(); ttl >= 0 && ttl < keep {
			t.expireQueue(keep)
		}
	}
	if all {
		t.tellQueue(msg, ClientOf(o))
	} else {
		t.watch(o, msg)
	}
	return o, tok
}

// watch tells the watchers of the hand-off msg to o (see [Watchers]).
func (t *tx) watch(o string, msg Message) {
	for _, w := range Watchers(t.k.Queue, t.k.Waits, o, t.now(), t.env.Claim) {
		t.tell(w, msg)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
