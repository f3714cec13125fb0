package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// redisUsecNote says what a "Redis usec" column counts.
const redisUsecNote = "Redis usec is INFO commandstats' usec summed over the commands the clients sent " +
	"(EVALSHA's includes the commands its script runs, which are not added again), per pair or acquisition; " +
	"the list below the table gives each one's time per call. "

// redisTime is the time Redis spent running the commands clients sent
// (INFO commandstats usec), counted once: a script's EVALSHA (EVAL, FCALL)
// already includes the commands the script runs, which INFO also counts
// under their own names.
type redisTime struct {
	usec  float64    // in µs, over every command sent
	kinds []kindTime // per command sent, most time first
}

// kindTime is the time of the calls of one command that clients sent.
type kindTime struct {
	name    string  // as sent, such as "evalsha" ("client" for "client|setinfo")
	calls   float64 // the calls clients sent, as far as Redis counted them
	usec    float64 // their time, in µs
	scripts bool    // scripts run it too: its time per call mixes both
}

// sentTime splits s, a delta of INFO commandstats, into what clients sent
// and what scripts ran, by sent: the commands the clients wrote over the
// same window, by name (the wireCounter's tally). A command Redis counted
// n times of which the clients sent k counts for min(k, n)/n of its time:
// all of it when only the clients send it (EVALSHA, or the floor's SET),
// none when only scripts run it, and a share by calls when both do.
// Subcommands (INFO's "client|setinfo") count under their command's name.
func (s redisStats) sentTime(sent map[string]int64) redisTime {
	type tally struct{ calls, usec int64 }
	byName := map[string]tally{}
	for cmd, n := range s.calls {
		name, _, _ := strings.Cut(cmd, "|")
		t := byName[name]
		t.calls += n
		t.usec += s.usec[cmd]
		byName[name] = t
	}
	var rt redisTime
	for name, t := range byName {
		k := min(sent[name], t.calls)
		if k <= 0 {
			continue
		}
		share := float64(k) / float64(t.calls)
		kt := kindTime{name: name, calls: float64(k), usec: float64(t.usec) * share, scripts: k < t.calls}
		rt.usec += kt.usec
		rt.kinds = append(rt.kinds, kt)
	}
	slices.SortFunc(rt.kinds, func(a, b kindTime) int {
		return cmp.Or(cmp.Compare(b.usec, a.usec), strings.Compare(a.name, b.name))
	})
	return rt
}

// perCall lists the commands sent with their time per call and their calls
// per unit of work, e.g. "evalsha 27.2 µs × 2/pair, set 1.9 µs × 1/pair".
// A command scripts run too is marked: its time per call is the average
// over both.
func (r redisTime) perCall(per float64, unit string) string {
	parts := make([]string, len(r.kinds))
	for i, k := range r.kinds {
		parts[i] = fmt.Sprintf("%s %.1f µs × %.3g/%s", k.name, k.usec/k.calls, k.calls/per, unit)
		if k.scripts {
			parts[i] += " (scripts run it too)"
		}
	}
	return strings.Join(parts, ", ")
}
