package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// patternEscaper escapes what PSUBSCRIBE would read as a glob.
var patternEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// A watchEvent is one line of watch's output.
type watchEvent struct {
	Time  time.Time `json:"time"`
	Event string    `json:"event"` // state, hand-off, turn or release
	// hand-off, turn, release: the owners and token of the message
	From  *jsonOwner `json:"from,omitempty"`
	To    *jsonOwner `json:"to,omitempty"`
	Token uint64     `json:"token,omitempty"`
	// state: the lock as Inspect reads it
	State *jsonInfo `json:"state,omitempty"`
}

// runWatch follows one lock from Redis's messages until ctx ends.
func runWatch(ctx context.Context, c *cli, args []string) int {
	key := args[0]
	ctx, cancel := context.WithCancel(ctx) // ends the subscriptions
	defer cancel()
	info, err := c.inspect(ctx, key)
	switch {
	case errors.Is(err, lock.ErrInvalid):
		return c.usageErr("%v", err)
	case err != nil:
		return c.fail(err)
	}
	msgs := make(chan *redis.Message, 64)
	notified := true
	for _, rdb := range c.rdbs {
		srv, err := serverOf(ctx, c, rdb, info.Name)
		if err != nil {
			return c.fail(err)
		}
		on, err := c.subscribe(ctx, srv, info.Name, msgs)
		if err != nil {
			return c.fail(err)
		}
		notified = notified && on
	}
	_, cluster := c.rdbs[0].(*redis.ClusterClient)
	switch {
	case !notified && cluster:
		fmt.Fprintf(c.env.stderr, "lockkit watch: keyspace notifications are off on this Redis Cluster (notify-keyspace-events), and a Cluster's sharded channels take no pattern: watch reads the lock every %v and shows each release, force-unlock and change of holder then; enable them on every master with CONFIG SET notify-keyspace-events Kghlx to see every change as it happens\n", pollEvery)
	case !notified:
		fmt.Fprintf(c.env.stderr, "lockkit watch: keyspace notifications are off on this Redis (notify-keyspace-events): watch reads the lock every %v and shows each release, force-unlock and change of holder then; enable them with CONFIG SET notify-keyspace-events Kghlx to see every change as it happens\n", pollEvery)
	}
	last := ""
	var prev lock.LockInfo
	show := func(info lock.LockInfo) error {
		if ev, line, ok := c.releaseOf(prev, info); ok {
			if err := c.emit(ev, line); err != nil {
				return err
			}
		}
		prev = info
		if line := stateLine(info); line != last {
			last = line
			return c.emit(watchEvent{Time: time.Now(), Event: "state", State: ptr(infoJSON(info))}, line)
		}
		return nil
	}
	if err := show(info); err != nil {
		return c.fail(err)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Without notifications, read again every pollEvery: a release
		// with nobody waiting and a force-unlock send no message.
		timer.Reset(time.Hour)
		if !notified {
			timer.Reset(pollEvery)
		}
		select {
		case <-ctx.Done():
			return exitOK
		case m := <-msgs:
			if err := c.message(m); err != nil {
				return c.fail(err)
			}
			c.drain(msgs)
		case <-timer.C:
		}
		if info, err = c.inspect(ctx, key); err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			return c.fail(err)
		}
		if err := show(info); err != nil {
			return c.fail(err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// pollEvery is how often watch reads the lock when Redis sends no keyspace
// notifications: a free lock's hash keeps its last releaser for about a
// second, so a release read this often is never missed.
const pollEvery = 100 * time.Millisecond

// releaseOf reports the release or force-unlock that ended prev's hold, as
// read in info, unless a message reported it already.
// A semaphore or read-write lock may keep holders through a release: a
// new last releaser tells it.
func (c *cli) releaseOf(prev, info lock.LockInfo) (watchEvent, string, bool) {
	switch {
	case !prev.Held || info.LastReleasedBy.ID == "":
		return watchEvent{}, "", false
	case shared(prev) || shared(info):
		if info.LastReleasedBy == prev.LastReleasedBy && info.Forced == prev.Forced {
			return watchEvent{}, "", false
		}
	case info.Held && info.Holder == prev.Holder:
		return watchEvent{}, "", false
	}
	by := info.LastReleasedBy
	seen := releaseID(by.ID, info.Forced)
	if seen == c.lastRelease {
		return watchEvent{}, "", false
	}
	c.lastRelease = seen
	if info.Forced {
		return watchEvent{Time: time.Now(), Event: "release", From: ownerJSON(by)}, "force-unlocked by " + by.String(), true
	}
	return watchEvent{Time: time.Now(), Event: "release", From: ownerJSON(by)}, "released by " + by.String(), true
}

// releaseID names a release: who let go and whether by force.
func releaseID(owner string, forced bool) string {
	if forced {
		return "!" + owner
	}
	return owner
}

// burst is how long watch waits after a message for the rest of its
// burst: one script changes several keys, then tells the waiters.
const burst = 5 * time.Millisecond

// drain reports the messages of a burst, so that the lock is read once
// after all of them.
func (c *cli) drain(msgs chan *redis.Message) {
	timer := time.NewTimer(burst)
	defer timer.Stop()
	for {
		select {
		case m := <-msgs:
			_ = c.message(m)
		case <-timer.C:
			return
		}
	}
}

func (c *cli) inspect(ctx context.Context, key string) (lock.LockInfo, error) {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	return c.client.Inspect(ctx, key)
}

// serverOf returns the client of the server that holds the lock name: the
// master of its slot on a Redis Cluster.
func serverOf(ctx context.Context, c *cli, rdb redis.UniversalClient, name string) (*redis.Client, error) {
	switch r := rdb.(type) {
	case *redis.Client:
		return r, nil
	case *redis.ClusterClient:
		ctx, cancel := c.callContext(ctx)
		defer cancel()
		return r.MasterForKey(ctx, name)
	}
	return nil, fmt.Errorf("cannot watch through a %T", rdb)
}

// subscribe sends srv's messages about the lock name to msgs: the hand-offs
// and turns on its channels (but on a Redis Cluster, whose sharded
// channels take no pattern) and its keyspace notifications. It reports
// whether notifications are on.
func (c *cli) subscribe(ctx context.Context, srv *redis.Client, name string, msgs chan<- *redis.Message) (bool, error) {
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	on := false
	if cfg, err := srv.ConfigGet(cctx, "notify-keyspace-events").Result(); err == nil {
		on = eventsOn(cfg["notify-keyspace-events"])
	}
	space := fmt.Sprintf("__keyspace@%d__:", srv.Options().DB)
	name = patternEscaper.Replace(name)
	patterns := []string{space + name, space + name + ":queue"}
	if _, cluster := c.rdbs[0].(*redis.ClusterClient); !cluster {
		patterns = append(patterns, name+":released*")
	}
	ps := srv.PSubscribe(cctx, patterns...)
	if _, err := ps.Receive(cctx); err != nil {
		_ = ps.Close()
		return false, fmt.Errorf("subscribe: %w", err)
	}
	go func() {
		<-ctx.Done()
		_ = ps.Close()
	}()
	go func() {
		for m := range ps.Channel() {
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return on, nil
}

// eventsOn reports whether notify-keyspace-events flags report every
// change of a lock's keys: K, and g, h, l, x (or A, all of them).
func eventsOn(flags string) bool {
	if !strings.Contains(flags, "K") {
		return false
	}
	if strings.Contains(flags, "A") {
		return true
	}
	for _, f := range "ghlx" {
		if !strings.ContainsRune(flags, f) {
			return false
		}
	}
	return true
}

// message reports a hand-off, turn or release message (keyspace
// notifications only make the lock be read again).
func (c *cli) message(m *redis.Message) error {
	if strings.HasPrefix(m.Channel, "__keyspace@") {
		return nil
	}
	f := strings.Fields(m.Payload)
	if len(f) == 0 || m.Payload == c.lastMsg {
		return nil // a hand-off is told to its receiver's Client and to watchers'
	}
	c.lastMsg = m.Payload
	from := lock.ParseOwner(strings.TrimPrefix(f[0], "!"))
	c.lastRelease = releaseID(from.ID, strings.HasPrefix(f[0], "!"))
	ev := watchEvent{Time: time.Now(), From: ownerJSON(from)}
	var line string
	by := "released by " + from.String()
	if strings.HasPrefix(f[0], "!") {
		by = "force-unlocked by " + from.String()
	}
	switch len(f) {
	case 1:
		ev.Event, line = "release", by
	case 2:
		to := lock.ParseOwner(f[1])
		ev.Event, ev.To, line = "turn", ownerJSON(to), fmt.Sprintf("turn of %s (waiters before it missed theirs; %s)", to, by)
	default:
		to := lock.ParseOwner(f[1])
		tok, _ := strconv.ParseUint(f[2], 10, 64)
		ev.Event, ev.To, ev.Token, line = "hand-off", ownerJSON(to), tok, fmt.Sprintf("handed to %s with token %d (%s)", to, tok, by)
	}
	return c.emit(ev, line)
}

// emit writes an event: its JSON, or the time and line.
func (c *cli) emit(ev watchEvent, line string) error {
	if c.opts.output == "json" {
		return writeJSON(c.env.stdout, ev)
	}
	_, err := fmt.Fprintf(c.env.stdout, "%s  %s\n", ev.Time.Format("15:04:05.000"), line)
	return err
}

// stateLine is a lock's state on one line, without what changes by itself
// (the remaining lease, how long waiters have waited).
func stateLine(in lock.LockInfo) string {
	var b strings.Builder
	switch {
	case shared(in):
		fmt.Fprintf(&b, "%s %s", in.Kind, sharedLine(in))
	case in.Held:
		fmt.Fprintf(&b, "held by %s (count %d, token %s)", in.Holder, in.HoldCount, token(in.Token))
	case in.Reserved:
		fmt.Fprintf(&b, "free, reserved for the turn of %s", in.ReservedFor)
	default:
		b.WriteString("free")
	}
	fmt.Fprintf(&b, "; %d waiting", in.Waiting)
	for i, w := range in.Waiters {
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		b.WriteString(sep + w.Owner.String() + readMark(w))
	}
	return b.String()
}
