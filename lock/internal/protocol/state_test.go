package protocol

import "testing"

// A waiter's states along one life: queued, told of a hand-off, its turn
// kept after the window, dropping when its place ends, absent once
// dropped; the holder holding, absent after its release.
func TestWaiterStates(t *testing.T) {
	w := NewWorld(start, CaseClaim, CaseLease)
	steps := []struct {
		op     Op
		owner  string
		want   WaiterKind
		holder WaiterKind // of c1:1
	}{
		{TryOp("c1:1"), "c2:1", Absent, Holding},
		{WaitOp("c2:1"), "c2:1", Queued, Holding},
		{WaitOp("c3:1"), "c2:1", Queued, Holding},
		{ReleaseOp("c1:1", 0), "c2:1", Told, Absent},
		{LapseOp(CaseClaim + 1), "c2:1", HasTurn, Absent},
		{LapseOp(CaseClaim / 2), "c2:1", Dropping, Absent},
		{CheckOp("c1:9"), "c2:1", Absent, Absent},
		{LapseOp(0), "c3:1", HasTurn, Absent},
		{WaitOp("c3:1"), "c3:1", Holding, Absent},
	}
	for i, s := range steps {
		w.Apply(s.op)
		if got := w.Key.Waiter(s.owner, w.Now, w.Claim); got != s.want {
			t.Errorf("after event %d, %v: %s is %v, want %v", i, s.op, s.owner, got, s.want)
		}
		if got := w.Key.Waiter("c1:1", w.Now, w.Claim); got != s.holder {
			t.Errorf("after event %d, %v: c1:1 is %v, want %v", i, s.op, got, s.holder)
		}
	}
}
