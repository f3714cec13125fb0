package protocol

import "fmt"

// Case settings: every case and random sequence runs with these (ms).
const (
	CaseClaim = 1000
	CaseLease = 5000
)

// A Case is one row of the transition table: events from an empty key,
// the last of them the transition under test, and what it must lead to.
// The model's tests check the expectations; the lock package's tests run
// the same events through the scripts on a real Redis and compare the
// data, replies and messages after every event.
type Case struct {
	Name    string
	NoQueue bool // claim window 0: quorum mode's scripts, no queue
	Ops     []Op
	State   StateKind // the key's state after the last event
	Owner   string    // the state's owner ("" for Free)
	Reply   int64     // the first element of the last event's reply
	Told    []string  // the last event's messages (see Brief)
}

// Brief is m without its token and time: "<client> <kind> <from>-><owner>".
func (m Message) Brief() string {
	switch m.Kind {
	case HandOff:
		return fmt.Sprintf("%s hand-off %s->%s", m.Client, m.From, m.Owner)
	case Turn:
		return fmt.Sprintf("%s turn %s->%s", m.Client, m.From, m.Owner)
	}
	return fmt.Sprintf("%s released %s", m.Client, m.From)
}

// Events that several cases start from.
var (
	// c1:1 holds; c2:1 and c3:1 wait.
	twoWaiting = []Op{TryOp("c1:1"), WaitOp("c2:1"), WaitOp("c3:1")}
	// c1:1 released to c2:1, whose Client died; c3:1 and c4:1 wait.
	deadReceiver = []Op{TryOp("c1:1"), WaitOp("c2:1"), WaitOp("c3:1"), WaitOp("c4:1"), DieOp("c2"), ReleaseOp("c1:1", 0)}
	// deadReceiver after the claim window, checked: c3:1's turn.
	turnAfterDead = then(deadReceiver, LapseOp(CaseClaim+1), CheckOp("c1:9"))
)

// longQueue is c1:1 holding with waiters: first, then c2:2 to c2:17,
// then last.
func longQueue(first, last []string) []Op {
	ops := []Op{TryOp("c1:1")}
	for _, o := range first {
		ops = append(ops, WaitOp(o))
	}
	for i := 2; i <= 17; i++ {
		ops = append(ops, WaitOp(fmt.Sprintf("c2:%d", i)))
	}
	for _, o := range last {
		ops = append(ops, WaitOp(o))
	}
	return ops
}

func then(ops []Op, more ...Op) []Op {
	return append(append([]Op(nil), ops...), more...)
}

// Cases is the transition table.
var Cases = []Case{
	{Name: "free/try takes", Ops: []Op{TryOp("c1:1")}, State: Held, Owner: "c1:1", Reply: 1},
	{Name: "held/try refused", Ops: []Op{TryOp("c1:1"), TryOp("c2:1")}, State: Held, Owner: "c1:1", Reply: 0},
	{Name: "held/wait queues", Ops: []Op{TryOp("c1:1"), WaitOp("c2:1")}, State: Held, Owner: "c1:1", Reply: 0},
	{Name: "held/wait again keeps the place", Ops: []Op{TryOp("c1:1"), WaitOp("c2:1"), WaitOp("c3:1"), WaitOp("c2:1")}, State: Held, Owner: "c1:1", Reply: 0},
	{Name: "held/re-entry", Ops: []Op{TryOp("c1:1"), EnterOp("c1:1", 2)}, State: Held, Owner: "c1:1", Reply: 2},
	{Name: "free/re-entry of a lost hold", Ops: []Op{EnterOp("c1:1", 2)}, State: Free, Reply: -1},
	{Name: "held/release one level", Ops: []Op{TryOp("c1:1"), EnterOp("c1:1", 2), ReleaseOp("c1:1", 1)}, State: Held, Owner: "c1:1", Reply: 1},
	{Name: "held/release, no queue: lingers free", Ops: []Op{TryOp("c1:1"), ReleaseOp("c1:1", 0)}, State: Free, Reply: 1},
	{Name: "free/retried release", Ops: []Op{TryOp("c1:1"), ReleaseOp("c1:1", 0), ReleaseOp("c1:1", 0)}, State: Free, Reply: 1},
	{Name: "free/release of no hold", Ops: []Op{ReleaseOp("c1:1", 0)}, State: Free, Reply: 0},
	{Name: "free/lingering hash: next token", Ops: []Op{TryOp("c1:1"), ReleaseOp("c1:1", 0), TryOp("c2:1")}, State: Held, Owner: "c2:1", Reply: 1},
	{Name: "free/after a lapsed lease: token from the clock", Ops: []Op{TryOp("c1:1"), LapseOp(CaseLease + 1), TryOp("c2:1")}, State: Held, Owner: "c2:1", Reply: 1},
	{Name: "held/renew", Ops: []Op{TryOp("c1:1"), LapseOp(1000), RenewOp("c1:1")}, State: Held, Owner: "c1:1", Reply: 1},
	{Name: "held/renew by another", Ops: []Op{TryOp("c1:1"), RenewOp("c2:1")}, State: Held, Owner: "c1:1", Reply: 0},
	{
		Name: "held/release hands off, watcher told", Ops: then(twoWaiting, ReleaseOp("c1:1", 0)),
		State: Handed, Owner: "c2:1", Reply: 1, Told: []string{"c2 hand-off c1:1->c2:1", "c3 hand-off c1:1->c2:1"},
	},
	{
		Name:  "held/long queue: no watcher behind, the last of another Client",
		Ops:   then(longQueue([]string{"c2:1"}, []string{"c3:1", "c4:1", "c5:1"}), ReleaseOp("c1:1", 0)),
		State: Handed, Owner: "c2:1", Reply: 1, Told: []string{"c2 hand-off c1:1->c2:1", "c5 hand-off c1:1->c2:1"},
	},
	{
		Name:  "held/long queue: two watchers behind, the last of a third Client",
		Ops:   then(longQueue([]string{"c2:1", "c3:1", "c4:1", "c3:2"}, []string{"c4:2", "c5:1", "c3:3"}), ReleaseOp("c1:1", 0)),
		State: Handed, Owner: "c2:1", Reply: 1, Told: []string{"c2 hand-off c1:1->c2:1", "c3 hand-off c1:1->c2:1", "c4 hand-off c1:1->c2:1", "c5 hand-off c1:1->c2:1"},
	},
	{
		Name: "held/hand-off within a Client: no message", Ops: []Op{TryOp("c1:1"), WaitOp("c1:2"), ReleaseOp("c1:1", 0)},
		State: Handed, Owner: "c1:2", Reply: 1,
	},
	{
		Name: "handed/retried release names the receiver", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), ReleaseOp("c1:1", 0)),
		State: Handed, Owner: "c2:1", Reply: 1,
	},
	{Name: "handed/confirm", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), ConfirmOp("c2:1")), State: Held, Owner: "c2:1", Reply: 1},
	{Name: "handed/attempt confirms", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), WaitOp("c2:1")), State: Held, Owner: "c2:1", Reply: 1},
	{Name: "handed/another's attempt refused", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), WaitOp("c3:1")), State: Handed, Owner: "c2:1", Reply: 0},
	{
		Name: "handed/receiver releases unconfirmed: next hand-off", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), ReleaseOp("c2:1", 0)),
		State: Handed, Owner: "c3:1", Reply: 1, Told: []string{"c3 hand-off c2:1->c3:1"},
	},
	{
		Name: "reserved/receiver's confirmation after its window: lost", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), LapseOp(CaseClaim+1), ConfirmOp("c2:1")),
		State: Reserved, Owner: "c2:1", Reply: -1,
	},
	{
		Name: "reserved/lapsed receiver's release passes the key on", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), LapseOp(CaseClaim+1), ReleaseOp("c2:1", 0)),
		State: Handed, Owner: "c3:1", Reply: 0, Told: []string{"c3 hand-off c2:1->c3:1"},
	},
	{
		Name: "reserved/lapsed receiver's release tells every queued Client, not only watchers",
		Ops: then(twoWaiting, WaitOp("c4:1"), WaitOp("c5:1"), WaitOp("c6:1"), WaitOp("c7:1"),
			ReleaseOp("c1:1", 0), LapseOp(CaseClaim+1), ReleaseOp("c2:1", 0)),
		State: Handed, Owner: "c3:1", Reply: 0,
		Told: []string{"c3 hand-off c2:1->c3:1", "c4 hand-off c2:1->c3:1", "c5 hand-off c2:1->c3:1", "c6 hand-off c2:1->c3:1", "c7 hand-off c2:1->c3:1"},
	},
	{
		Name:  "missed/a lapsed receiver's release handed to a dead waiter: one window",
		Ops:   then(twoWaiting, DieOp("c3"), ReleaseOp("c1:1", 0), LapseOp(CaseClaim+1), ReleaseOp("c2:1", 0), LapseOp(CaseClaim+1), TryOp("c4:1")),
		State: Held, Owner: "c4:1", Reply: 1,
	},
	{Name: "reserved/receiver's attempt takes", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), LapseOp(CaseClaim+1), WaitOp("c2:1")), State: Held, Owner: "c2:1", Reply: 1},
	{Name: "reserved/another's attempt refused", Ops: then(twoWaiting, ReleaseOp("c1:1", 0), LapseOp(CaseClaim+1), TryOp("c4:1")), State: Reserved, Owner: "c2:1", Reply: -2},
	{Name: "reserved/after a lapsed lease: another's attempt refused", Ops: []Op{TryOp("c1:1"), WaitOp("c2:1"), LapseOp(CaseLease + 1), TryOp("c3:1")}, State: Reserved, Owner: "c2:1", Reply: -2},
	{
		Name: "missed/check drops the dead receiver, turn announced", Ops: turnAfterDead,
		State: TurnOpens, Owner: "c3:1", Reply: 0, Told: []string{"c3 turn c1:9->c3:1", "c4 turn c1:9->c3:1"},
	},
	{
		Name: "missed/next waiter's attempt takes its turn", Ops: then(deadReceiver, LapseOp(CaseClaim+1), WaitOp("c3:1")),
		State: Held, Owner: "c3:1", Reply: 1, Told: []string{"c3 turn c3:1->c3:1", "c4 turn c3:1->c3:1"},
	},
	{
		Name:  "missed/dead Client's other waiters dropped too",
		Ops:   []Op{TryOp("c1:1"), WaitOp("c2:1"), WaitOp("c3:1"), WaitOp("c2:2"), DieOp("c2"), ReleaseOp("c1:1", 0), LapseOp(CaseClaim + 1), CheckOp("c1:9")},
		State: TurnOpens, Owner: "c3:1", Reply: 0, Told: []string{"c3 turn c1:9->c3:1"},
	},
	{Name: "turn/others come back when it opens", Ops: then(turnAfterDead, WaitOp("c4:1")), State: TurnOpens, Owner: "c3:1", Reply: -2},
	{Name: "open/a tenth of the window in: a waiter's attempt takes", Ops: then(turnAfterDead, LapseOp(CaseClaim/10), WaitOp("c4:1")), State: Held, Owner: "c4:1", Reply: 1},
	{Name: "open/a new caller's attempt takes too", Ops: then(turnAfterDead, LapseOp(CaseClaim/10), TryOp("c5:1")), State: Held, Owner: "c5:1", Reply: 1},
	{
		Name: "turn/its waiter leaves: hand-off told to all", Ops: then(turnAfterDead, LeaveOp("c3:1")),
		State: Handed, Owner: "c4:1", Reply: 1, Told: []string{"c4 hand-off c3:1->c4:1"},
	},
	{Name: "turn/another leaves: turn unchanged", Ops: then(turnAfterDead, LeaveOp("c4:1")), State: TurnOpens, Owner: "c3:1", Reply: 1},
	{
		Name:  "handed/receiver leaves: hand-off told to all",
		Ops:   then(twoWaiting, WaitOp("c4:1"), ReleaseOp("c1:1", 0), LeaveOp("c2:1")),
		State: Handed, Owner: "c3:1", Reply: 1, Told: []string{"c3 hand-off c2:1->c3:1", "c4 hand-off c2:1->c3:1"},
	},
	{
		Name:  "handed/a watcher leaves: watchers told again",
		Ops:   then(twoWaiting, WaitOp("c4:1"), WaitOp("c5:1"), ReleaseOp("c1:1", 0), LeaveOp("c3:1")),
		State: Handed, Owner: "c2:1", Reply: 1, Told: []string{"c4 hand-off c3:1->c2:1", "c5 hand-off c3:1->c2:1"},
	},
	{Name: "held/a waiter leaves", Ops: then(twoWaiting, LeaveOp("c3:1")), State: Held, Owner: "c1:1", Reply: 1},
	{Name: "held/leave of no waiter", Ops: []Op{TryOp("c1:1"), LeaveOp("c2:1")}, State: Held, Owner: "c1:1", Reply: 0},
	{
		Name: "handed/watch tells every other queued Client", Ops: then(twoWaiting, WaitOp("c4:1"), ReleaseOp("c1:1", 0), WatchOp("c1:9")),
		State: Handed, Owner: "c2:1", Reply: 0, Told: []string{"c3 hand-off c1:9->c2:1", "c4 hand-off c1:9->c2:1"},
	},
	{Name: "held/watch: nothing to tell", Ops: then(twoWaiting, WatchOp("c1:9")), State: Held, Owner: "c1:1", Reply: 0},
	{Name: "held/check: nothing to check", Ops: then(twoWaiting, CheckOp("c1:9")), State: Held, Owner: "c1:1", Reply: 0},
	{
		Name: "held/force hands off, told to all", Ops: then(twoWaiting, ForceOp("c5:9", "")),
		State: Handed, Owner: "c2:1", Reply: 1, Told: []string{"c2 hand-off !c5:9->c2:1", "c3 hand-off !c5:9->c2:1"},
	},
	{Name: "held/force of another owner than expected", Ops: []Op{TryOp("c1:1"), ForceOp("c5:9", "c2:1")}, State: Held, Owner: "c1:1", Reply: 2},
	{Name: "free/force of nothing", Ops: []Op{ForceOp("c5:9", "")}, State: Free, Reply: 0},
	{Name: "free/forced owner's release is lost", Ops: []Op{TryOp("c1:1"), ForceOp("c5:9", "c1:1"), ReleaseOp("c1:1", 0)}, State: Free, Reply: 0},
	{Name: "free/forced owner's renewal is lost", Ops: []Op{TryOp("c1:1"), ForceOp("c5:9", ""), RenewOp("c1:1")}, State: Free, Reply: 0},
	{
		Name: "no queue/release told on the key's channel", NoQueue: true, Ops: []Op{TryOp("c1:1"), WaitOp("c2:1"), ReleaseOp("c1:1", 0)},
		State: Free, Reply: 1, Told: []string{" released c1:1"},
	},
	{
		Name: "no queue/force told on the key's channel", NoQueue: true, Ops: []Op{TryOp("c1:1"), ForceOp("c5:9", "")},
		State: Free, Reply: 1, Told: []string{" released !c5:9"},
	},
}
