package protocol

import "fmt"

// OpKind is the kind of an event on a key.
type OpKind int

const (
	OpAcquire OpKind = iota // acquire.lua in Op.Mode, to count Op.N
	OpRelease               // release.lua to count Op.N
	OpLeave                 // leave.lua
	OpForce                 // force.lua by Op.Owner, of Op.Expect ("" any)
	OpRenew                 // renew.lua
	OpLapse                 // Op.D ms pass
	OpDie                   // Op.Owner's Client dies: its subscription ends
	OpFreeze                // Op.Owner's Client stops (SIGSTOP): subscribed, silent
	OpShare                 // share.lua's Op.Share
)

// An Op is one event on a key: a script call by Op.Owner, time passing,
// or a Client's death.
type Op struct {
	Kind   OpKind
	Owner  string
	N      int64
	Mode   Mode
	Expect string
	D      int64
	Share  ShareCall
}

func (op Op) String() string {
	switch op.Kind {
	case OpAcquire:
		return fmt.Sprintf("acquire(%s, n=%d, %v)", op.Owner, op.N, op.Mode)
	case OpRelease:
		return fmt.Sprintf("release(%s, n=%d)", op.Owner, op.N)
	case OpLeave:
		return fmt.Sprintf("leave(%s)", op.Owner)
	case OpForce:
		return fmt.Sprintf("force(by %s, of %q)", op.Owner, op.Expect)
	case OpRenew:
		return fmt.Sprintf("renew(%s)", op.Owner)
	case OpLapse:
		return fmt.Sprintf("lapse(%d ms)", op.D)
	case OpShare:
		c := op.Share
		return fmt.Sprintf("share(%s, %s %s, limit %d, n=%d, wait %v)", op.Owner, c.Op, c.Hold, c.Limit, c.N, c.Wait)
	}
	if op.Kind == OpFreeze {
		return fmt.Sprintf("freeze(%s)", ClientOf(op.Owner))
	}
	return fmt.Sprintf("die(%s)", ClientOf(op.Owner))
}

var modeNames = [...]string{"Try", "Wait", "Confirm", "Check", "Watch"}

func (m Mode) String() string { return modeNames[m] }

// Shorthands for the ops of cases and random sequences.
func TryOp(o string) Op     { return Op{Kind: OpAcquire, Owner: o, N: 1, Mode: Try} }
func WaitOp(o string) Op    { return Op{Kind: OpAcquire, Owner: o, N: 1, Mode: Wait} }
func ConfirmOp(o string) Op { return Op{Kind: OpAcquire, Owner: o, N: 1, Mode: Confirm} }
func CheckOp(o string) Op   { return Op{Kind: OpAcquire, Owner: o, N: 1, Mode: Check} }
func WatchOp(o string) Op   { return Op{Kind: OpAcquire, Owner: o, N: 1, Mode: Watch} }
func EnterOp(o string, n int64) Op {
	return Op{Kind: OpAcquire, Owner: o, N: n, Mode: Try}
}
func ReleaseOp(o string, n int64) Op { return Op{Kind: OpRelease, Owner: o, N: n} }
func LeaveOp(o string) Op            { return Op{Kind: OpLeave, Owner: o} }
func ForceOp(by, expect string) Op   { return Op{Kind: OpForce, Owner: by, Expect: expect} }
func RenewOp(o string) Op            { return Op{Kind: OpRenew, Owner: o} }
func LapseOp(d int64) Op             { return Op{Kind: OpLapse, D: d} }
func DieOp(client string) Op         { return Op{Kind: OpDie, Owner: client + ":0"} }
func FreezeOp(client string) Op      { return Op{Kind: OpFreeze, Owner: client + ":0"} }

// World is one key's data with the moment and the Clients' liveness, the
// settings every Client of it shares (ms), and the events applied so far.
type World struct {
	Key    Key
	Now    int64
	Claim  int64
	Lease  int64
	Linger int64
	Dead   map[string]bool // Clients whose process died: not subscribed
	Frozen map[string]bool // Clients stopped: subscribed, making no calls
	Micros int64           // see Env.Micros
}

// Stopped reports whether client makes no more calls: dead or frozen.
func (w *World) Stopped(client string) bool { return w.Dead[client] || w.Frozen[client] }

// NewWorld returns an empty key at now with the lock package's defaults
// for a lease: a claim window of claim ms, and linger min(lease, 1 s).
func NewWorld(now, claim, lease int64) *World {
	return &World{Now: now, Claim: claim, Lease: lease, Linger: min(lease, 1000), Dead: map[string]bool{}, Frozen: map[string]bool{}}
}

// Env is the environment of a script call at the world's moment.
func (w *World) Env() Env {
	return Env{Now: w.Now, Claim: w.Claim, Micros: w.Micros, Subscribed: func(c string) bool { return !w.Dead[c] }}
}

// Step returns what op does to the world's key, without applying it; for
// Lapse, Die and Freeze, whose effect is on the world, the key as it is.
func (w *World) Step(op Op) Step {
	env := w.Env()
	switch op.Kind {
	case OpAcquire:
		return w.Key.Acquire(env, op.Owner, w.Lease, op.N, op.Mode)
	case OpRelease:
		return w.Key.Release(env, op.Owner, op.N, w.Linger)
	case OpLeave:
		return w.Key.Leave(env, op.Owner, w.Linger)
	case OpForce:
		return w.Key.Force(env, op.Owner, op.Expect, 1000)
	case OpRenew:
		return w.Key.Renew(env, op.Owner, w.Lease)
	case OpShare:
		return w.Key.Share(env, op.Owner, op.Share, w.Lease, w.Linger)
	}
	return w.Key.Lapse(w.Now)
}

// Apply applies op to the world and returns its step.
func (w *World) Apply(op Op) Step {
	switch op.Kind {
	case OpLapse:
		w.Now += op.D
	case OpDie:
		w.Dead[ClientOf(op.Owner)] = true
	case OpFreeze:
		w.Frozen[ClientOf(op.Owner)] = true
	}
	s := w.Step(op)
	w.Key = s.Next
	return s
}
