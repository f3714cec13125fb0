package protocol

import (
	"slices"
	"strings"
	"testing"
)

// fromState is the state a case's name says its last event starts from.
var fromState = map[string]StateKind{
	"free": Free, "held": Held, "handed": Handed, "reserved": Reserved,
	"missed": Missed, "turn": TurnOpens, "open": OpenToAny,
}

// start is the moment every model test starts at: a Redis clock in ms.
const start = 1_700_000_000_000

// newCaseWorld is the world a case runs in.
func newCaseWorld(c Case) *World {
	claim := int64(CaseClaim)
	if c.NoQueue {
		claim = 0
	}
	return NewWorld(start, claim, CaseLease)
}

func briefs(ms []Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Brief())
	}
	return out
}

func TestCases(t *testing.T) {
	for _, c := range Cases {
		t.Run(c.Name, func(t *testing.T) {
			w := newCaseWorld(c)
			var last Step
			for i, op := range c.Ops {
				if i == len(c.Ops)-1 {
					prefix, _, _ := strings.Cut(c.Name, "/")
					if want, ok := fromState[prefix]; ok && w.Key.State(w.Now, w.Claim).Kind != want {
						t.Errorf("the last event starts from %v, not %v", w.Key.State(w.Now, w.Claim), want)
					}
				}
				last = w.Apply(op)
				if err := w.Key.Consistent(); err != nil {
					t.Fatalf("after event %d, %v: %v", i, op, err)
				}
			}
			s := w.Key.State(w.Now, w.Claim)
			if s.Kind != c.State || s.Owner != c.Owner {
				t.Errorf("state %v, want %v %s", s, c.State, c.Owner)
			}
			if len(last.Reply) == 0 || last.Reply[0].Int != c.Reply {
				t.Errorf("reply %v, want first element %d", last.Reply, c.Reply)
			}
			if got := briefs(last.Msgs); !slices.Equal(got, c.Told) {
				t.Errorf("told %q, want %q", got, c.Told)
			}
		})
	}
}

// Tokens handed out by the cases' events only grow, across releases,
// hand-offs, forced unlocks and lapsed hashes.
func TestCaseTokensIncrease(t *testing.T) {
	for _, c := range Cases {
		w := newCaseWorld(c)
		var max int64
		for _, op := range c.Ops {
			w.Apply(op)
			for _, h := range w.Key.Holders() {
				if h.Token < max {
					t.Fatalf("%s: %v: token %d after %d", c.Name, op, h.Token, max)
				}
				max = h.Token
			}
		}
	}
}
