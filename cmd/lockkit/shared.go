package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/lockkit/lockkit/lock"
)

// Semaphores and read-write locks: several holders, each with its own
// hold count, token and lease (lock.Permit).

// jsonPermit is a lock.Permit in -o json; the lease in milliseconds.
type jsonPermit struct {
	Owner            *jsonOwner `json:"owner"`
	HoldCount        int        `json:"hold_count"`
	Token            uint64     `json:"token"`
	RemainingLeaseMS int64      `json:"remaining_lease_ms"`
	Write            bool       `json:"write,omitempty"`
}

func permitsJSON(ps []lock.Permit) []jsonPermit {
	var out []jsonPermit
	for _, p := range ps {
		out = append(out, jsonPermit{Owner: ownerJSON(p.Owner), HoldCount: p.HoldCount, Token: p.Token, RemainingLeaseMS: p.RemainingLease.Milliseconds(), Write: p.Write})
	}
	return out
}

// shared reports whether in is a semaphore's or a read-write lock's.
func shared(in lock.LockInfo) bool {
	return in.Kind == lock.KindSemaphore || in.Kind == lock.KindReadWrite
}

// holdersSummary is a shared key's holders in a few words: "2 of 3
// permits", "writer <owner>", "3 readers".
func holdersSummary(in lock.LockInfo) string {
	switch {
	case in.Kind == lock.KindSemaphore:
		return fmt.Sprintf("%d of %d permits", in.Holding, in.Limit)
	case in.Holder.ID != "":
		return "writer " + in.Holder.String()
	case in.Holding == 1:
		return "1 reader"
	}
	return fmt.Sprintf("%d readers", in.Holding)
}

// permitKind names what p holds of a key of kind.
func permitKind(kind string, p lock.Permit) string {
	switch {
	case kind == lock.KindSemaphore:
		return "permit"
	case p.Write:
		return "write"
	}
	return "read"
}

// sharedState writes a shared key's kind, state and holders as
// stateText's "name:\tvalue" lines.
func sharedState(tw io.Writer, in lock.LockInfo) {
	fmt.Fprintf(tw, "kind:\t%s\n", in.Kind)
	state := "free"
	if in.Held {
		state = "held"
	}
	fmt.Fprintf(tw, "state:\t%s, %s\n", state, holdersSummary(in))
	for i, p := range in.Permits {
		fmt.Fprintf(tw, "  %d.\t%s, %s, count %d, token %s, lease left %s\n", i+1, p.Owner, permitKind(in.Kind, p), p.HoldCount, token(p.Token), dur(p.RemainingLease))
		fmt.Fprintf(tw, "    owner id:\t%s\n", p.Owner.ID)
	}
	if more := in.Holding - len(in.Permits); more > 0 {
		fmt.Fprintf(tw, "  ...\tand %d more\n", more)
	}
}

// sharedLine is a shared key's holders on one line for watch, without
// what changes by itself (the leases).
func sharedLine(in lock.LockInfo) string {
	var b strings.Builder
	b.WriteString(holdersSummary(in))
	for i, p := range in.Permits {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s (%s, count %d, token %s)", sep, p.Owner, permitKind(in.Kind, p), p.HoldCount, token(p.Token))
	}
	if more := in.Holding - len(in.Permits); more > 0 {
		fmt.Fprintf(&b, " and %d more", more)
	}
	return b.String()
}

// readMark marks a queued reader in text output.
func readMark(w lock.Waiter) string {
	if w.Read {
		return " (reader)"
	}
	return ""
}
