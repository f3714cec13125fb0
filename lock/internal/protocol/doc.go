// Package protocol is the waiting and hand-off protocol of one lock key
// as a state machine over a model of its Redis data: the lock hash, the
// wait queue, the waits hash and their TTLs, in milliseconds of Redis's
// clock. It is pure Go: no Redis, no goroutines, no clock of its own.
//
// Each transition is a function of the key's data, the moment and the
// caller's arguments, one per script mode of the lock package
// (acquire.lua's five modes, release.lua, leave.lua, force.lua,
// renew.lua), plus [Key.Lapse] for time passing. It returns the next data,
// the script's reply and the messages the script publishes:
//
//	step := k.Release(env, owner, 0, linger)
//	k, msgs := step.Next, step.Msgs
//
// [Key.State] and [Key.Waiter] name the states the data is in, and
// [Watchers] is the rule of who is told of a hand-off. docs/protocol.md
// has the transition table and the state diagram; the lock package's
// tests run the same cases against the scripts on a real Redis: [Cases],
// [World], [RandomOp] and the Diff functions serve both packages' tests,
// and nothing in the lock package runs this model.
//
// Holders are a set bounded by [Limit]: the decisions ask whether the set
// has room (see [Key.Holders]). A counting semaphore is this machine with
// a larger limit and a hash that stores the set; today the hash stores
// one owner.
package protocol
