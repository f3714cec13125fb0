package lock

import (
	"testing"
	"time"
)

// A holder's field of a shared key (share.lua) as Inspect reads it: its
// kind, in capitals while a hand-off is unconfirmed.
func TestParsePermitReadsKindAndHandOff(t *testing.T) {
	for _, tc := range []struct {
		v             string
		write, handed bool
	}{
		{"p 1 7 2500", false, false},
		{"P 1 7 2500", false, true},
		{"r 2 7 2500", false, false},
		{"w 1 7 2500", true, false},
		{"W 1 7 2500", true, true},
	} {
		p, err := parsePermit(2000, "c:1", tc.v)
		if err != nil || p.Write != tc.write || p.Handed != tc.handed || p.Token != 7 || p.RemainingLease != 500*time.Millisecond {
			t.Errorf("%q: %+v, %v", tc.v, p, err)
		}
	}
}
