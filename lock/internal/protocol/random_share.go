package protocol

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// A ShareSetup is the kind of key a random sequence of shared holds plays
// on: a semaphore of Limit permits, or (Limit 0) a read-write lock whose
// owners "<client>:1" and "<client>:3" read and "<client>:2" writes,
// which may start as a Lock's hash (FromLock).
type ShareSetup struct {
	Limit    int64
	FromLock bool
}

// RandomShareSetup picks a setup.
func RandomShareSetup(r *rand.Rand) ShareSetup {
	if r.IntN(2) == 0 {
		return ShareSetup{Limit: 1 + r.Int64N(3)}
	}
	return ShareSetup{FromLock: r.IntN(3) == 0}
}

// Hold is the kind of hold owner asks for in the setup.
func (s ShareSetup) Hold(owner string) string {
	if s.Limit > 0 {
		return "p"
	}
	if strings.HasSuffix(owner, ":2") {
		return "w"
	}
	return "r"
}

// Call is the share.lua call op of owner in the setup.
func (s ShareSetup) Call(owner, op string, n int64, wait bool) Op {
	return Op{Kind: OpShare, Owner: owner, Share: ShareCall{Op: op, Hold: s.Hold(owner), Limit: s.Limit, N: n, Wait: wait}}
}

// RandomShareOp returns a random event of shared holds on w's key by one
// of clients Clients, each with owners "<client>:1" to "<client>:3": the
// calls of share.lua and renew.lua by live Clients' owners (biased
// towards holders and the queue's front), time passing, and a death or a
// stop (never of the last Client that acts). In a setup FromLock, owners
// ":2" sometimes wait for, release and confirm the key as a Lock
// (acquire.lua, release.lua), whose scripts answer -3 once it is a
// read-write lock's.
func RandomShareOp(r *rand.Rand, w *World, clients int, s ShareSetup) Op {
	live := w.acting(clients)
	owner := fmt.Sprintf("%s:%d", live[r.IntN(len(live))], 1+r.IntN(3))
	k := w.Key.At(w.Now)
	if hs := k.SharedHolders(w.Now); len(hs) > 0 && r.IntN(3) == 0 {
		if h := hs[r.IntN(len(hs))]; !w.Stopped(ClientOf(h.Owner)) {
			owner = h.Owner
		}
	} else if len(k.Queue) > 0 && !w.Stopped(ClientOf(k.Queue[0])) && r.IntN(3) == 0 {
		owner = k.Queue[0]
	}
	lock := s.FromLock && s.Hold(owner) == "w" // Lock calls, on a Lock's hash or not (acquire.lua then answers -3)
	switch n := r.IntN(100); {
	case lock && n < 10:
		return WaitOp(owner)
	case lock && n < 15:
		return ReleaseOp(owner, 0)
	case lock && n < 18:
		return ConfirmOp(owner)
	case n < 25:
		return s.Call(owner, "a", 1, true)
	case n < 31:
		return s.Call(owner, "a", 1, false)
	case n < 45:
		return s.Call(owner, "r", 0, false)
	case n < 50:
		return s.Call(owner, "c", 1, false)
	case n < 53:
		return s.Call(owner, "a", 2, false)
	case n < 55:
		return s.Call(owner, "r", 1, false)
	case n < 61:
		return s.Call(owner, "l", 0, false)
	case n < 89:
		return worldOp(r, n, live, owner)
	case n < 95:
		return s.Call(ClientOf(owner)+":9", "k", 0, false)
	}
	return RenewOp(owner)
}

// SharedHolders is the set of shared holders of the key whose lease has
// not ended at now (see [Key.Share]), in no order.
func (k Key) SharedHolders(now int64) []Holder {
	var hs []Holder
	for f, v := range k.Hash {
		if !strings.HasPrefix(f, "=") {
			continue
		}
		if s, ok := parseShared(v); ok && s.until >= now {
			tok, _ := strconv.ParseInt(s.token, 10, 64)
			n, _ := strconv.ParseInt(s.count, 10, 64)
			hs = append(hs, Holder{Owner: f[1:], Count: n, Token: tok, Until: s.until, Confirmed: s.kind == strings.ToLower(s.kind)})
		}
	}
	return hs
}

// SharedRoom reports the first way the key's live shared holders at now
// break its room (more than a semaphore's limit, or a writer with
// anyone) or its queue (a holder still queued, a queue that outlives the
// hash, and so the key's kind).
func (k Key) SharedRoom(now int64) error {
	hs := k.SharedHolders(now)
	for _, h := range hs {
		if slices.Contains(k.Queue, h.Owner) {
			return fmt.Errorf("holder %s still queued in %v", h.Owner, k.Queue)
		}
	}
	if _, ok := k.Hash["k"]; ok && k.Queue != nil && !k.flagged() {
		return fmt.Errorf("queue %v not flagged in the hash %v", k.Queue, k.Hash)
	}
	if _, ok := k.Hash["k"]; ok && k.Queue != nil && k.HashExp < k.QueueExp {
		return fmt.Errorf("the queue outlives the hash, which says its kind, by %d ms", k.QueueExp-k.HashExp)
	}
	kind := k.Hash["k"]
	var writers int
	for _, h := range hs {
		if s, _ := parseShared(k.Hash["="+h.Owner]); s.writer() {
			writers++
		}
	}
	limit, err := strconv.Atoi(strings.TrimPrefix(kind, "s"))
	switch {
	case err == nil && len(hs) > limit:
		return fmt.Errorf("%d holders of %s", len(hs), kind)
	case writers > 0 && len(hs) > 1:
		return fmt.Errorf("a writer among %d holders", len(hs))
	case k.count() > 0 && len(hs) > 0:
		return fmt.Errorf("a lock holder and %d shared holders", len(hs))
	}
	return nil
}
