package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// The invariants over random sequences of events by 3 to 5 Clients:
// every snapshot is consistent (a TTL on every key, at most one holder, the
// queue and waits agree), tokens strictly increase, the key goes to
// waiters in queue order (skipping only waiters that left or were dropped,
// or while a turn is open to any), and a released key is obtainable within
// two claim windows whatever dead Clients' waiters do. One sequence in
// eight runs without a queue (claim window 0), as quorum mode does.
func TestRandomSequences(t *testing.T) {
	seed := rand.Uint64()
	const sequences, steps = 1000, 40
	for i := range sequences {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		clients := 3 + r.IntN(3)
		claim := int64(CaseClaim)
		if i%8 == 7 {
			claim = 0 // quorum mode's calls: no queue
		}
		w := NewWorld(start, claim, RandomLease(r))
		var ops []Op
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, sequence %d, events %v: %s", seed, i, ops, fmt.Sprintf(format, args...))
		}
		var maxTok int64
		for range steps {
			op := RandomOp(r, w, clients)
			ops = append(ops, op)
			before := w.Key.At(w.Now + lapseOf(op))
			beforeState := before.State(w.Now+lapseOf(op), w.Claim)
			w.Apply(op)
			if err := w.Key.Consistent(); err != nil {
				fail("%v", err)
			}
			for _, h := range w.Key.Holders() {
				if h.Token < maxTok || (h.Token == maxTok && !holds(before, h.Owner)) {
					fail("new holder %s with token %d after %d", h.Owner, h.Token, maxTok)
				}
				maxTok = h.Token
			}
			if err := inOrder(before, beforeState, w.Key); err != nil {
				fail("%v", err)
			}
		}
		if d := obtainable(w, clients); d > 2*CaseClaim {
			fail("key obtainable only %d ms after its release", d)
		}
	}
}

func lapseOf(op Op) int64 {
	if op.Kind == OpLapse {
		return op.D
	}
	return 0
}

func holds(k Key, owner string) bool {
	for _, h := range k.Holders() {
		if h.Owner == owner {
			return true
		}
	}
	return false
}

// inOrder checks that a new holder in after was first among the waiters
// of before that are still queued, unless before was open to any; and
// that a caller not queued took the key only when it was free, open to
// any, or every waiter was dropped.
func inOrder(before Key, s State, after Key) error {
	for _, h := range after.Holders() {
		if holds(before, h.Owner) {
			continue
		}
		i := slices.Index(before.Queue, h.Owner)
		if i < 0 {
			if s.Kind == Free || s.Kind == OpenToAny || (s.Kind == Missed && after.Queue == nil) {
				continue
			}
			return fmt.Errorf("%s, not queued, took the key in state %v", h.Owner, s)
		}
		if s.Kind == OpenToAny {
			continue
		}
		for _, ahead := range before.Queue[:i] {
			if slices.Contains(after.Queue, ahead) {
				return fmt.Errorf("%s got the key before %s, ahead of it in %v", h.Owner, ahead, before.Queue)
			}
		}
	}
	return nil
}

// obtainable releases w's key (a forced unlock when its holder's Client
// is stopped) and returns how long it takes, in ms, until an owner of a
// Client that acts holds it, while those Clients' waiters and a new
// caller try every twentieth of a claim window and dead or frozen
// Clients' waiters do nothing.
func obtainable(w *World, clients int) int64 {
	k := w.Key.At(w.Now)
	if hs := k.Holders(); len(hs) > 0 {
		if w.Stopped(ClientOf(hs[0].Owner)) {
			w.Apply(ForceOp("c9:9", ""))
		} else {
			w.Apply(ReleaseOp(hs[0].Owner, 0))
		}
	}
	const poll = CaseClaim / 20
	for elapsed := int64(0); elapsed <= 3*CaseClaim; elapsed += poll {
		var tries []string
		for _, o := range w.Key.At(w.Now).Queue {
			if !w.Stopped(ClientOf(o)) {
				tries = append(tries, o)
			}
		}
		for _, o := range append(tries, "p:1") {
			w.Apply(WaitOp(o))
			if hs := w.Key.Holders(); len(hs) > 0 && !w.Stopped(ClientOf(hs[0].Owner)) {
				return elapsed
			}
		}
		w.Apply(LapseOp(poll))
	}
	return 3*CaseClaim + 1
}
