package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockkit/lockkit/lock"
)

// jsonOwner is a lock.Owner in -o json.
type jsonOwner struct {
	ID    string `json:"id"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	Label string `json:"label,omitempty"`
	// Internal: a lock an integration takes for itself (lock.Integration.Internal).
	Internal bool `json:"internal,omitempty"`
}

func ownerJSON(o lock.Owner) *jsonOwner {
	if o.ID == "" {
		return nil
	}
	return &jsonOwner{ID: o.ID, Host: o.Host, PID: o.PID, Label: o.Label, Internal: o.Internal}
}

type jsonWaiter struct {
	Owner    *jsonOwner `json:"owner"`
	WaitedMS int64      `json:"waited_ms"`
	Read     bool       `json:"read,omitempty"` // a queued RLock
}

// jsonInfo is a lock.LockInfo in -o json; durations in milliseconds.
type jsonInfo struct {
	Key              string       `json:"key"`
	KeyBase64        string       `json:"key_base64,omitempty"`
	Name             string       `json:"name"`
	Node             string       `json:"node,omitempty"`
	Kind             string       `json:"kind"`            // lock, semaphore or read-write
	Limit            int          `json:"limit,omitempty"` // a semaphore's
	Held             bool         `json:"held"`
	Holder           *jsonOwner   `json:"holder,omitempty"`
	HoldCount        int          `json:"hold_count"`
	RemainingLeaseMS int64        `json:"remaining_lease_ms"`
	Token            uint64       `json:"token"`
	Holding          int          `json:"holding,omitempty"` // holders of a semaphore or read-write lock
	Permits          []jsonPermit `json:"permits,omitempty"` // the first lock.MaxListedPermits of them
	Reserved         bool         `json:"reserved"`
	ReservedFor      *jsonOwner   `json:"reserved_for,omitempty"`
	TurnLeftMS       int64        `json:"turn_left_ms,omitempty"`
	Waiting          int          `json:"waiting"`
	Waiters          []jsonWaiter `json:"waiters"`
	LastReleasedBy   *jsonOwner   `json:"last_released_by,omitempty"`
	Forced           bool         `json:"forced,omitempty"`
	Nodes            []jsonInfo   `json:"nodes,omitempty"`
	Error            string       `json:"error,omitempty"`
}

func infoJSON(in lock.LockInfo) jsonInfo {
	out := jsonInfo{
		Name: in.Name, Node: in.Node, Kind: in.Kind, Limit: in.Limit,
		Holding: in.Holding, Permits: permitsJSON(in.Permits),
		Held: in.Held, Holder: ownerJSON(in.Holder), HoldCount: in.HoldCount,
		RemainingLeaseMS: in.RemainingLease.Milliseconds(), Token: in.Token,
		Reserved: in.Reserved, ReservedFor: ownerJSON(in.ReservedFor), TurnLeftMS: in.TurnLeft.Milliseconds(),
		Waiting: in.Waiting, Waiters: []jsonWaiter{},
		LastReleasedBy: ownerJSON(in.LastReleasedBy), Forced: in.Forced,
	}
	if in.Key != "" { // "" for a key stored by its digest
		out.Key, out.KeyBase64 = display(in.Key), keyBase64(in.Key)
	}
	for _, w := range in.Waiters {
		out.Waiters = append(out.Waiters, jsonWaiter{Owner: ownerJSON(w.Owner), WaitedMS: w.Waited.Milliseconds(), Read: w.Read})
	}
	for _, n := range in.Nodes {
		out.Nodes = append(out.Nodes, infoJSON(n))
	}
	if in.Err != nil {
		out.Error = in.Err.Error()
	}
	return out
}

// writeJSON writes v as one line of JSON.
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

// keyOf is how a lock's key is shown: its Redis name when the key is
// stored by digest.
func keyOf(in lock.LockInfo) string {
	if in.Key == "" {
		return in.Name
	}
	return in.Key
}

// lsTable writes locks as a table, with a NODE column when they come from
// several servers.
func lsTable(w io.Writer, infos []lock.LockInfo) error {
	nodes := false
	for _, in := range infos {
		nodes = nodes || in.Node != ""
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "KEY\tHOLDER\tCOUNT\tLEASE\tTOKEN\tWAITING"
	if nodes {
		head += "\tNODE"
	}
	fmt.Fprintln(tw, head)
	for _, in := range infos {
		holder, count, lease := in.Holder.String(), strconv.Itoa(in.HoldCount), dur(in.RemainingLease)
		switch {
		case shared(in) && in.Holder.ID == "":
			holder, count, lease = holdersSummary(in), "-", "-"
		case shared(in):
			holder = holdersSummary(in)
		case !in.Held:
			holder, count, lease = "(reserved for "+in.ReservedFor.String()+")", "-", "-"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d", display(keyOf(in)), holder, count, lease, token(in.Token), in.Waiting)
		if nodes {
			line += "\t" + in.Node
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

// showText writes one lock in full.
func showText(w io.Writer, in lock.LockInfo) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', 0)
	fmt.Fprintf(tw, "key:\t%s\n", display(keyOf(in)))
	stateText(tw, in)
	for _, n := range in.Nodes {
		fmt.Fprintf(tw, "node %s:\t", n.Node)
		switch {
		case n.Err != nil:
			fmt.Fprintf(tw, "error: %v\n", n.Err)
		case n.Held:
			fmt.Fprintf(tw, "held by %s, count %d, lease %s\n", n.Holder, n.HoldCount, dur(n.RemainingLease))
		default:
			fmt.Fprintln(tw, "free")
		}
	}
	return tw.Flush()
}

// stateText writes a lock's state, holder and queue as "name:\tvalue"
// lines; a semaphore's or read-write lock's kind and holders.
func stateText(tw io.Writer, in lock.LockInfo) {
	switch {
	case shared(in):
		sharedState(tw, in)
	case in.Held:
		fmt.Fprintf(tw, "state:\theld\n")
		fmt.Fprintf(tw, "holder:\t%s\n", in.Holder)
		fmt.Fprintf(tw, "owner id:\t%s\n", in.Holder.ID)
		fmt.Fprintf(tw, "hold count:\t%d\n", in.HoldCount)
		fmt.Fprintf(tw, "lease left:\t%s\n", dur(in.RemainingLease))
	case in.Reserved:
		fmt.Fprintf(tw, "state:\tfree, reserved for the turn of %s (%s left)\n", in.ReservedFor, dur(in.TurnLeft))
	default:
		fmt.Fprintf(tw, "state:\tfree\n")
	}
	if len(in.Nodes) == 0 {
		fmt.Fprintf(tw, "fencing token:\t%s\n", token(in.Token))
	}
	fmt.Fprintf(tw, "waiting:\t%d\n", in.Waiting)
	for i, wt := range in.Waiters {
		fmt.Fprintf(tw, "  %d.\t%s%s, waited %s\n", i+1, wt.Owner, readMark(wt), dur(wt.Waited))
	}
	if in.LastReleasedBy.ID != "" {
		how := "released"
		if in.Forced {
			how = "force-unlocked"
		}
		fmt.Fprintf(tw, "last %s by:\t%s\n", how, in.LastReleasedBy)
	}
}

func dur(d time.Duration) string {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Millisecond).String()
}

func token(t uint64) string {
	if t == 0 {
		return "-"
	}
	return strconv.FormatUint(t, 10)
}

// display is how a key (or any name from Redis) is printed: as it is when
// every rune is printable, it holds no space and does not start with '"';
// else Go-quoted ("orders:1\n"), so that a table row stays one line and
// no control sequence reaches the terminal. Every KEY argument reads
// that form back (see keyArg).
func display(key string) string {
	if key != "" && utf8.ValidString(key) && !strings.HasPrefix(key, `"`) &&
		strings.IndexFunc(key, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) < 0 {
		return key
	}
	return strconv.Quote(key)
}

// keyArg reads a KEY or PATTERN argument: a Go-quoted string, as display
// prints keys that need it, is unquoted; anything else is taken as it is.
func keyArg(arg string) (string, error) {
	if !strings.HasPrefix(arg, `"`) {
		return arg, nil
	}
	key, err := strconv.Unquote(arg)
	if err != nil {
		return "", fmt.Errorf("key %s starts with '\"' but is not a Go-quoted string (quote a key that starts with '\"')", arg)
	}
	return key, nil
}

// keyBase64 is the key's exact bytes in -o json.
func keyBase64(key string) string {
	return base64.StdEncoding.EncodeToString([]byte(key))
}
