package protocol

import "fmt"

// Limit is how many owners may hold a key at once: 1, a mutex. The
// decisions of the transitions ask whether the holder set has room.
const Limit = 1

// A Holder is an owner holding the key: its hold count, token and when
// its lease (or claim window) ends, in ms.
type Holder struct {
	Owner     string
	Count     int64
	Token     int64
	Until     int64
	Confirmed bool // false: handed to it, not confirmed yet
}

// Holders is the set of owners holding the key at its data's moment.
func (k Key) Holders() []Holder {
	if k.count() <= 0 {
		return nil
	}
	tok, _ := k.token()
	o := k.owner()
	return []Holder{{Owner: o, Count: k.count(), Token: tok, Until: k.HashExp, Confirmed: !k.waiting(o)}}
}

// holder returns owner as a holder of the key, if it is one.
func (k Key) holder(owner string) (Holder, bool) {
	for _, h := range k.Holders() {
		if h.Owner == owner {
			return h, true
		}
	}
	return Holder{}, false
}

// full reports whether the holder set has no room: an attempt by another
// owner does not take the key.
func (k Key) full() bool { return len(k.Holders()) >= Limit }

// StateKind names a state of the key.
type StateKind int

const (
	// Free: no holder, no live queue; the next attempt takes the key.
	Free StateKind = iota
	// Held: Owner holds the key, confirmed, until Until.
	Held
	// Handed: the key was handed to Owner with Token, which has not
	// confirmed; it lapses at Until (the claim window).
	Handed
	// Reserved: free, kept for the first queued waiter, Owner, until Until
	// (its deadline): only its attempt takes the key.
	Reserved
	// TurnOpens: free, Owner's turn after waiters before it missed
	// theirs; it opens to any queued waiter at OpenAt.
	TurnOpens
	// OpenToAny: free, the first attempt takes it, a queued waiter's or
	// not, until Until.
	OpenToAny
	// Missed: free, and the first waiter's place ended: the next attempt,
	// check or leave drops it (with its Client's other waiters) and starts
	// the next waiter's turn.
	Missed
)

var stateNames = [...]string{"Free", "Held", "Handed", "Reserved", "TurnOpens", "OpenToAny", "Missed"}

func (s StateKind) String() string { return stateNames[s] }

// State is the named state of a key.
type State struct {
	Kind   StateKind
	Owner  string // Held, Handed: the holder; Reserved, TurnOpens, Missed: the first waiter
	Count  int64
	Token  int64
	OpenAt int64 // TurnOpens
	Until  int64
}

func (s State) String() string {
	switch s.Kind {
	case Held, Handed:
		return fmt.Sprintf("%v{%s n=%d t=%d until=%d}", s.Kind, s.Owner, s.Count, s.Token, s.Until)
	case Free:
		return "Free"
	}
	return fmt.Sprintf("%v{%s open=%d until=%d}", s.Kind, s.Owner, s.OpenAt, s.Until)
}

// State names the state of k at now, as an attempt at now with claim
// window claim (ms; 0: no queue) would find it.
func (k Key) State(now, claim int64) State {
	k = k.At(now)
	if k.full() {
		h := k.Holders()[0]
		s := State{Kind: Held, Owner: h.Owner, Count: h.Count, Token: h.Token, Until: h.Until}
		if !h.Confirmed {
			s.Kind = Handed
		}
		return s
	}
	_, hasOwner := k.field("o")
	if claim == 0 || !(k.flagged() || !hasOwner) || k.Queue == nil {
		return State{Kind: Free}
	}
	o := k.Queue[0]
	d := k.Waits[o]
	if d <= now {
		return State{Kind: Missed, Owner: o, Until: d}
	}
	at, until := k.num("open"), k.num("open_until")
	switch {
	case at > 0 && now < until && at <= now:
		return State{Kind: OpenToAny, Owner: o, Until: until}
	case at > 0 && now < until:
		return State{Kind: TurnOpens, Owner: o, OpenAt: at, Until: until}
	}
	return State{Kind: Reserved, Owner: o, Until: d}
}

// WaiterKind names the state of one owner in a key's data.
type WaiterKind int

const (
	// Absent: not queued and not holding (never came, left, was dropped,
	// or released).
	Absent WaiterKind = iota
	// Queued: in the queue, its place kept until its deadline.
	Queued
	// HasTurn: first in the queue of a free key kept for it.
	HasTurn
	// Told: the key was handed to it; it has not confirmed.
	Told
	// Holding: it holds the key, confirmed.
	Holding
	// Dropping: queued, its place ended; the call that finds it at the
	// front of the queue drops it.
	Dropping
)

var waiterNames = [...]string{"Absent", "Queued", "HasTurn", "Told", "Holding", "Dropping"}

func (w WaiterKind) String() string { return waiterNames[w] }

// Waiter names the state of owner in k at now (claim as for State).
func (k Key) Waiter(owner string, now, claim int64) WaiterKind {
	k = k.At(now)
	if h, ok := k.holder(owner); ok && h.Confirmed {
		return Holding
	} else if ok {
		return Told
	}
	d, ok := k.Waits[owner]
	switch {
	case !ok:
		return Absent
	case d <= now:
		return Dropping
	}
	s := k.State(now, claim)
	if (s.Kind == Reserved || s.Kind == TurnOpens) && s.Owner == owner {
		return HasTurn
	}
	return Queued
}
