package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// Liveness with waiters that sleep as the lock package's do, rather than
// poll: a waiter tries again only when its last reply's time runs out,
// when a hand-off or turn names it, when its Client watches a hand-off (a
// claim window later) or hears a turn for another (when it opens); the
// releasing Client checks a hand-off to another Client after the claim
// window, and again while a place or turn is on. Some Clients die, stop
// for good, or stall a while (their calls and messages wait until they
// go on): up to two Clients, the failures the checks of a hand-off are
// made to survive (a dead receiver, and the releasing Client or a
// watcher). Every release with waiters of Clients that never stopped must
// see an acting owner hold the key within two claim windows, at most one owner
// believes it holds the key at any time (a belief lasts the validity the
// lock package gives: the lease from a reply, the claim window from a
// hand-off), and every owner of a Client that acts in the end gets the
// key.
func TestSleepingWaiters(t *testing.T) {
	seed := rand.Uint64()
	for i := range 500 {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		s := newSim(r)
		if err := s.run(); err != nil {
			t.Fatalf("seed %d, run %d: %v\n%s", seed, i, err, s.log)
		}
	}
}

// An event of the simulation: owner's call at At (or its Client's check
// for check).
type event struct {
	at    int64
	owner string
	what  string  // "lock", "try", "confirm", "renew", "release", "check", "stop", "stall", "resume", "die"
	msg   Message // "deliver"
}

type sim struct {
	r       *rand.Rand
	w       *World
	events  []event
	waiting map[string]bool  // owners in a Lock call
	holding map[string]int64 // owners that believe they hold the key, until when
	resume  map[string]int64 // stalled Clients: when they go on
	stalled map[string]bool  // Clients that stopped at some time
	done    map[string]bool  // owners whose Lock call ended
	owners  []string
	log     string
	due     int64 // a release left acting waiters queued: one must hold by then (0: none)
}

func newSim(r *rand.Rand) *sim {
	s := &sim{r: r, w: NewWorld(start, CaseClaim, CaseLease),
		waiting: map[string]bool{}, holding: map[string]int64{}, done: map[string]bool{}, resume: map[string]int64{}, stalled: map[string]bool{}}
	clients := 3 + r.IntN(3)
	for c := 1; c <= clients; c++ {
		for o := 1; o <= 1+r.IntN(3); o++ {
			owner := fmt.Sprintf("c%d:%d", c, o)
			s.owners = append(s.owners, owner)
			s.at(start+r.Int64N(2*CaseClaim), owner, "lock")
		}
	}
	for _, c := range r.Perm(clients - 1)[:min(2, clients-1)] { // c1 always acts
		o := fmt.Sprintf("c%d:0", c+2)
		switch at := start + r.Int64N(3*CaseClaim); r.IntN(5) {
		case 0:
			s.at(at, o, "die")
		case 1:
			s.at(at, o, "stop")
		case 2, 3:
			s.at(at, o, "stall")
			s.resume[ClientOf(o)] = at + CaseClaim/2 + r.Int64N(3*CaseClaim)
			s.at(s.resume[ClientOf(o)], o, "resume")
		}
	}
	return s
}

func (s *sim) at(t int64, owner, what string) {
	s.events = append(s.events, event{at: t, owner: owner, what: what})
}

func (s *sim) acts(owner string) bool { return !s.w.Stopped(ClientOf(owner)) }

// apply runs op now and delivers its messages.
func (s *sim) apply(op Op) Step {
	step := s.w.Apply(op)
	s.log += fmt.Sprintf("%d %v -> %v %v %v\n", s.w.Now-start, op, step.Reply.Ints(), briefs(step.Msgs), s.w.Key.State(s.w.Now, s.w.Claim))
	for _, m := range step.Msgs {
		s.deliver(m)
	}
	return step
}

func (s *sim) run() error {
	const limit = start + 60*CaseClaim
	for len(s.events) > 0 {
		i := 0
		for j, e := range s.events {
			if e.at < s.events[i].at {
				i = j
			}
		}
		e := s.events[i]
		s.events = slices.Delete(s.events, i, i+1)
		if s.due != 0 && e.at > s.due && s.actingWaiter() {
			return fmt.Errorf("no acting waiter holds the key two claim windows after a release (at %d; waiting %v, stopped %v %v)", s.due-start, s.waiting, s.w.Dead, s.w.Frozen)
		}
		if e.at > limit {
			break
		}
		if e.at > s.w.Now {
			s.w.Apply(LapseOp(e.at - s.w.Now))
		}
		if err := s.handle(e); err != nil {
			return err
		}
		if n := s.believers(); n > 1 {
			return fmt.Errorf("%d owners believe they hold the key: %v", n, s.holding)
		}
	}
	for _, o := range s.owners {
		if s.acts(o) && !s.done[o] && !s.w.Dead[ClientOf(o)] {
			return fmt.Errorf("%s never got the key", o)
		}
	}
	return nil
}

func (s *sim) handle(e event) error {
	c := ClientOf(e.owner)
	switch e.what {
	case "die":
		s.apply(DieOp(c))
		s.forget(c)
		return nil
	case "stop", "stall":
		s.apply(FreezeOp(c))
		s.stalled[c] = true
		if e.what == "stop" {
			s.forget(c)
			delete(s.resume, c)
		}
		return nil
	case "resume":
		s.w.Frozen[c] = false
		return nil
	}
	if s.w.Dead[c] {
		return nil
	}
	if s.w.Frozen[c] {
		if at, ok := s.resume[c]; ok { // it goes on later
			e.at = at
			s.events = append(s.events, e)
		}
		return nil
	}
	if e.what == "deliver" {
		s.deliver(e.msg)
		return nil
	}
	if until, ok := s.holding[e.owner]; ok && until <= s.w.Now {
		s.lost(e.owner) // its validity ran out: the watchdog ended the hold
		return nil
	}
	switch e.what {
	case "lock":
		s.waiting[e.owner] = true
		s.attempt(e.owner)
	case "try":
		if s.waiting[e.owner] {
			s.attempt(e.owner)
		}
	case "confirm", "renew":
		if _, ok := s.holding[e.owner]; !ok {
			break
		}
		op := RenewOp(e.owner)
		if e.what == "confirm" {
			op = ConfirmOp(e.owner)
		}
		if s.apply(op).Reply[0].Int != 1 {
			s.lost(e.owner)
		} else {
			s.holding[e.owner] = s.w.Now + CaseLease
			s.at(s.w.Now+CaseLease/3, e.owner, "renew")
		}
	case "release":
		if _, ok := s.holding[e.owner]; ok {
			s.release(e.owner)
		}
	case "check":
		if v := s.apply(CheckOp(c + ":9")).Reply; len(v) > 1 && v[1].Int > 0 {
			s.at(s.w.Now+v[1].Int+1, e.owner, "check")
		}
	}
	return nil
}

// forget ends what client's owners believe: the process is gone.
func (s *sim) forget(client string) {
	for o := range s.holding {
		if ClientOf(o) == client {
			delete(s.holding, o)
		}
	}
}

// believers counts the owners whose belief that they hold the key is
// still valid.
func (s *sim) believers() int {
	n := 0
	for _, until := range s.holding {
		if until > s.w.Now {
			n++
		}
	}
	return n
}

// attempt is a waiter's attempt: it holds the key, or sleeps until its
// reply's time runs out.
func (s *sim) attempt(owner string) {
	v := s.apply(WaitOp(owner)).Reply
	if v[0].Int == 1 {
		s.got(owner, s.w.Now+CaseLease, false)
		return
	}
	s.at(s.w.Now+v[1].Int+1, owner, "try")
}

// got makes owner a holder until valid: it confirms a hand-off a third
// of a claim window in, renews, and releases after a while.
func (s *sim) got(owner string, valid int64, handed bool) {
	s.waiting[owner] = false
	s.holding[owner] = valid
	s.due = 0
	if handed {
		s.at(s.w.Now+CaseClaim/3, owner, "confirm")
	} else {
		s.at(s.w.Now+CaseLease/3, owner, "renew")
	}
	s.at(s.w.Now+1+s.r.Int64N(3*CaseClaim), owner, "release")
}

// lost ends owner's hold as the lock package does when its key is gone.
func (s *sim) lost(owner string) {
	delete(s.holding, owner)
	s.done[owner] = true
	s.apply(ReleaseOp(owner, 0)) // the unlock of a lost hold still releases
}

func (s *sim) release(owner string) {
	delete(s.holding, owner)
	s.done[owner] = true
	step := s.apply(ReleaseOp(owner, 0))
	if len(step.Reply) == 4 {
		next := step.Reply[1].Str
		if ClientOf(next) == ClientOf(owner) {
			s.got(next, s.w.Now+CaseClaim, true) // the reply tells this Client's waiter
		} else {
			s.at(s.w.Now+CaseClaim+1, owner, "check")
		}
	}
	if s.believers() == 0 && s.actingWaiter() {
		s.due = s.w.Now + 2*CaseClaim
	}
}

// actingWaiter reports whether an owner of a Client that always acted is
// in a Lock call.
func (s *sim) actingWaiter() bool {
	for o, w := range s.waiting {
		if w && s.acts(o) && !s.stalled[ClientOf(o)] {
			return true
		}
	}
	return false
}

// deliver hands m to its Client, unless that Client died; a stalled one
// reads it when it goes on, and a hand-off read later than half a claim
// window after it was made is confirmed with an attempt.
func (s *sim) deliver(m Message) {
	switch {
	case m.Client == "" || s.w.Dead[m.Client]:
		return
	case s.w.Frozen[m.Client]:
		if at, ok := s.resume[m.Client]; ok {
			s.events = append(s.events, event{at: at, owner: m.Client + ":0", what: "deliver", msg: m})
		}
		return
	}
	var first string
	for _, o := range s.w.Key.Queue {
		if ClientOf(o) == m.Client && s.waiting[o] {
			first = o
			break
		}
	}
	switch {
	case m.Kind == HandOff && ClientOf(m.Owner) == m.Client && s.waiting[m.Owner]:
		if s.w.Now-m.At > CaseClaim/2 {
			s.at(s.w.Now, m.Owner, "try")
		} else {
			s.got(m.Owner, m.At+CaseClaim, true)
		}
	case m.Kind == Turn && ClientOf(m.Owner) == m.Client && s.waiting[m.Owner]:
		s.at(s.w.Now, m.Owner, "try")
	case first == "":
	case m.Kind == HandOff: // a watcher: try when the claim window ends
		s.at(s.w.Now+CaseClaim+1, first, "try")
	case m.Kind == Turn: // try when the turn opens to any
		s.at(s.w.Now+CaseClaim/10+1, first, "try")
	}
}
