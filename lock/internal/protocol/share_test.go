package protocol

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The invariants of shared holds over random sequences of events by 3 to
// 5 Clients on a semaphore of 1 to 3 permits or a read-write lock (some
// starting as a Lock's hash): every snapshot is consistent (a TTL on every
// key, the queue and waits agree); the live holders fit (at most the
// limit; a writer alone); every new holder's token is larger than all
// before; room goes to queued waiters in queue order, and to a caller not
// queued only when no waiter ahead of it is left; and once the Clients
// that act let go, a new owner gets the key within a lease and two claim
// windows, whatever dead or stopped Clients' holders and waiters do.
func TestRandomSharedSequences(t *testing.T) {
	seed := rand.Uint64()
	const sequences, steps = 1000, 40
	for i := range sequences {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		clients := 3 + r.IntN(3)
		setup := RandomShareSetup(r)
		w := NewWorld(start, CaseClaim, RandomLease(r))
		var ops []Op
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("seed %d, sequence %d (%+v), events %v: %s", seed, i, setup, ops, fmt.Sprintf(format, args...))
		}
		var maxTok int64
		for range steps {
			op := RandomShareOp(r, w, clients, setup)
			ops = append(ops, op)
			before := w.Key.At(w.Now + lapseOf(op))
			now := w.Now + lapseOf(op)
			w.Apply(op)
			if err := w.Key.Consistent(); err != nil {
				fail("%v", err)
			}
			if err := w.Key.SharedRoom(w.Now); err != nil {
				fail("%v", err)
			}
			for _, h := range newHolders(before, w.Key, now) {
				if h.Token <= maxTok {
					fail("new holder %s with token %d after %d", h.Owner, h.Token, maxTok)
				}
				maxTok = h.Token
				if err := sharedInOrder(before, w.Key, now, op.Owner, h.Owner); err != nil {
					fail("%v", err)
				}
			}
		}
		if d := sharedObtainable(w, clients, setup); d < 0 {
			fail("a new owner got no hold after the others let go")
		}
	}
}

// newHolders are the holders of after (shared or the lock's) that were
// not holders of before at now, by token.
func newHolders(before, after Key, now int64) []Holder {
	had := map[string]bool{}
	for _, h := range append(before.SharedHolders(now), before.Holders()...) {
		had[h.Owner] = true
	}
	var hs []Holder
	for _, h := range append(after.SharedHolders(now), after.Holders()...) {
		if !had[h.Owner] {
			hs = append(hs, h)
		}
	}
	slices.SortFunc(hs, func(a, b Holder) int { return cmp.Compare(a.Token, b.Token) })
	return hs
}

// sharedInOrder checks that o, a new holder, was not served before a
// live waiter ahead of it that is still queued (a caller not queued is
// behind every waiter). A waiter whose place ended at now, and every
// waiter of its Client, is not live: a call drops them (and one of them
// that calls joins again at the back); so are the waiters of a Client
// whose hand-off lapsed unconfirmed, but the caller's.
func sharedInOrder(before, after Key, now int64, caller, o string) error {
	ahead := before.Queue
	if i := slices.Index(before.Queue, o); i >= 0 {
		ahead = before.Queue[:i]
	}
	lapsed := map[string]bool{}
	for _, w := range before.Queue {
		if before.Waits[w] <= now {
			lapsed[ClientOf(w)] = true
		}
	}
	for f, v := range before.Hash { // a hand-off that lapsed unconfirmed
		if s, ok := parseShared(v); ok && f[0] == '=' && s.until < now && s.kind != strings.ToLower(s.kind) && ClientOf(f[1:]) != ClientOf(caller) {
			lapsed[ClientOf(f[1:])] = true
		}
	}
	for _, a := range ahead {
		if !lapsed[ClientOf(a)] && slices.Contains(after.Queue, a) {
			return fmt.Errorf("%s got room before %s, ahead of it in %v", o, a, before.Queue)
		}
	}
	return nil
}

// sharedObtainable has the Clients that act let go of the key (release
// their holds, leave the queue), lets a lease and two claim windows pass,
// and returns 0 when a new owner's attempt then succeeds, -1 otherwise.
func sharedObtainable(w *World, clients int, s ShareSetup) int {
	k := w.Key.At(w.Now)
	for _, h := range append(k.SharedHolders(w.Now), k.Holders()...) {
		if !w.Stopped(ClientOf(h.Owner)) {
			if k.count() > 0 {
				w.Apply(ReleaseOp(h.Owner, 0))
			} else {
				w.Apply(s.Call(h.Owner, "r", 0, false))
			}
		}
	}
	for _, o := range k.Queue {
		if !w.Stopped(ClientOf(o)) {
			w.Apply(s.Call(o, "l", 0, false))
		}
	}
	w.Apply(LapseOp(w.Lease + 2*CaseClaim))
	var actor string
	for i := 1; i <= clients && actor == ""; i++ {
		if c := fmt.Sprintf("c%d", i); !w.Stopped(c) {
			actor = c + ":2"
		}
	}
	step := w.Apply(s.Call(actor, "a", 1, false))
	if step.Reply[0].Int == 1 {
		return 0
	}
	return -1
}
