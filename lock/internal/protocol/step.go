package protocol

import (
	"strconv"
	"strings"
)

// Env is what a transition knows besides the key's data: the moment, the
// caller's Client configuration and which Clients listen.
type Env struct {
	Now   int64 // Redis's clock, ms
	Claim int64 // claim window, ms; 0: no wait queue (quorum mode)

	// Micros is Redis's clock in µs, the token of a lock whose hash is
	// gone; 0 stands for Now*1000.
	Micros int64

	// Subscribed reports whether a Client listens on its channel of the
	// key (a PUBLISH to it reaches someone); nil: no Client does.
	Subscribed func(client string) bool
}

func (e Env) micros() int64 {
	if e.Micros != 0 {
		return e.Micros
	}
	return e.Now * 1000
}

// MsgKind is the kind of a published message.
type MsgKind int

const (
	// HandOff: the lock was handed to Owner with Token at At;
	// "<from> <owner> <token> <ms>".
	HandOff MsgKind = iota
	// Turn: the lock is free and it is Owner's turn; "<from> <owner>".
	Turn
	// Released: quorum mode's release, on the key's channel; "<from>".
	Released
)

// A Message is one PUBLISH of a script: on the key's channel followed by
// ":" and Client, or on the key's channel itself when Client is "".
type Message struct {
	Client string
	Kind   MsgKind
	From   string
	Owner  string
	Token  int64
	At     int64 // ms
}

// Payload is the message as published.
func (m Message) Payload() string {
	switch m.Kind {
	case HandOff:
		return m.From + " " + m.Owner + " " + strconv.FormatInt(m.Token, 10) + " " + strconv.FormatInt(m.At, 10)
	case Turn:
		return m.From + " " + m.Owner
	}
	return m.From
}

// ParseMessage reads a payload published on client's channel (client ""
// for the key's own channel).
func ParseMessage(client, payload string) (Message, bool) {
	f := strings.Split(payload, " ")
	m := Message{Client: client, From: f[0]}
	switch len(f) {
	case 1:
		m.Kind = Released
	case 2:
		m.Kind, m.Owner = Turn, f[1]
	case 4:
		m.Kind, m.Owner = HandOff, f[1]
		var err1, err2 error
		m.Token, err1 = strconv.ParseInt(f[2], 10, 64)
		m.At, err2 = strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			return m, false
		}
	default:
		return m, false
	}
	return m, true
}

// ValKind says how an element of a reply is compared: exactly, or as a
// moment, a duration or a token read from Redis's clock.
type ValKind int

const (
	Exact ValKind = iota // an integer or a string
	Time                 // ms of Redis's clock
	Dur                  // ms from now: a PTTL, or the time left of a turn
	Token                // a fencing token (from the clock when the hash was gone)
)

// A Value is one element of a script's reply: Str when it is a string,
// else Int.
type Value struct {
	Kind  ValKind
	Int   int64
	Str   string
	IsStr bool
}

// Reply is a script's reply, element by element.
type Reply []Value

func ints(vs ...int64) Reply {
	r := make(Reply, len(vs))
	for i, v := range vs {
		r[i] = Value{Int: v}
	}
	return r
}

func (r Reply) with(k ValKind, v int64) Reply { return append(r, Value{Kind: k, Int: v}) }

func (r Reply) str(s string) Reply { return append(r, Value{Str: s, IsStr: true}) }

// Ints returns the integer elements of r (0 for a string).
func (r Reply) Ints() []int64 {
	out := make([]int64, len(r))
	for i, v := range r {
		out[i] = v.Int
	}
	return out
}

// Step is the outcome of a transition: the next data, the script's reply
// and the messages it published, in order.
type Step struct {
	Next  Key
	Reply Reply
	Msgs  []Message
}
