package protocol

import (
	"fmt"
	"math/rand/v2"
)

// lapses are the durations a random Lapse picks from (ms): around a
// tenth, a half, one and one and a half claim windows, and a lease.
var lapses = []int64{1, 50, CaseClaim/10 + 1, CaseClaim/10 + 1, CaseClaim / 2, CaseClaim - 1, CaseClaim + 1, CaseClaim + 1, CaseClaim*3/2 + 1, CaseClaim*3/2 + 1, 2 * CaseClaim, CaseLease + 1}

// RandomLease returns a lease (ms) for a random sequence: most often the
// cases' lease, sometimes one shorter than a second (a queued waiter's
// place then counts a second, and a released hash lingers the lease) or
// than the claim window.
func RandomLease(r *rand.Rand) int64 {
	return []int64{CaseLease, CaseLease, 300, 1500}[r.IntN(4)]
}

// RandomOp returns a random event on w's key by one of clients Clients
// ("c1", "c2" …), each with owners "<client>:1" and "<client>:2": script
// calls by owners of live Clients (biased towards the holder and the
// queue's front, so that keys change hands), time passing, and a death
// or a stop (never of the last Client that acts).
func RandomOp(r *rand.Rand, w *World, clients int) Op {
	live := w.acting(clients)
	owner := fmt.Sprintf("%s:%d", live[r.IntN(len(live))], 1+r.IntN(2))
	k := w.Key.At(w.Now)
	if hs := k.Holders(); len(hs) > 0 && !w.Stopped(ClientOf(hs[0].Owner)) && r.IntN(3) == 0 {
		owner = hs[0].Owner
	} else if len(k.Queue) > 0 && !w.Stopped(ClientOf(k.Queue[0])) && r.IntN(3) == 0 {
		owner = k.Queue[0]
	}
	switch n := r.IntN(100); {
	case n < 25:
		return WaitOp(owner)
	case n < 31:
		return TryOp(owner)
	case n < 45:
		return ReleaseOp(owner, 0)
	case n < 50:
		return ConfirmOp(owner)
	case n < 53:
		return EnterOp(owner, 2)
	case n < 55:
		return ReleaseOp(owner, 1)
	case n < 61:
		return LeaveOp(owner)
	case n < 89:
		return worldOp(r, n, live, owner)
	case n < 91:
		return ForceOp(owner, "")
	case n < 97:
		return CheckOp(ClientOf(owner) + ":9")
	case n < 99:
		return WatchOp(ClientOf(owner) + ":9")
	}
	return RenewOp(owner)
}

// acting returns the Clients ("c1" … of clients) that are neither dead
// nor stopped.
func (w *World) acting(clients int) []string {
	var live []string
	for i := 1; i <= clients; i++ {
		if c := fmt.Sprintf("c%d", i); !w.Stopped(c) {
			live = append(live, c)
		}
	}
	return live
}

// worldOp is an event of the world for a random n in [61, 89): owner's
// Client dies or stops (n < 69; time passes instead when it is the last
// Client that acts), or time passes.
func worldOp(r *rand.Rand, n int, live []string, owner string) Op {
	switch {
	case n >= 69:
		return LapseOp(lapses[r.IntN(len(lapses))])
	case len(live) == 1:
		return LapseOp(1)
	case r.IntN(3) == 0:
		return FreezeOp(ClientOf(owner))
	}
	return DieOp(ClientOf(owner))
}
