package leader_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// Child processes of TestFaultsNeverTwoLeaders: the test binary run again
// with LOCKKIT_LEADER_CHILD (locktest.StartChild) becomes one replica of
// the election "fault" and never runs the tests.

const childEnv = "LOCKKIT_LEADER_CHILD"

// childVar is the environment of replica id: Redis's address, the lease
// and the file it appends its events to.
func childVar(addr string, id int, lease time.Duration, file string) string {
	return fmt.Sprintf("%s=%s %d %d %s", childEnv, addr, id, lease.Milliseconds(), file)
}

// runChild runs the child process its environment asks for, if any, and
// reports whether it did.
func runChild() bool {
	v := os.Getenv(childEnv)
	if v == "" {
		return false
	}
	f := strings.Fields(v)
	id, _ := strconv.Atoi(f[1])
	ms, _ := strconv.Atoi(f[2])
	if err := replica(f[0], id, time.Duration(ms)*time.Millisecond, f[3]); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	return true
}

// fenced is the fenced store: it accepts a write (ARGV[1], a fencing
// token) only when its token is at least the last accepted one's, and
// lists the others in KEYS[2] ("<replica> <token> <stored token>").
var fenced = redis.NewScript(`
local stored = tonumber(redis.call('GET', KEYS[1]) or '0')
local token = tonumber(ARGV[1])
if token < stored then
	redis.call('RPUSH', KEYS[2], ARGV[2] .. ' ' .. ARGV[1] .. ' ' .. stored)
	return 0
end
redis.call('SET', KEYS[1], ARGV[1])
return 1`)

// Keys of the fenced store.
const (
	storeKey    = "store:token"
	refusalsKey = "store:refused"
)

// An event line is "<kind> <replica> <token> <unix µs> [details]", kinds:
//
//	start   lead began (the time taken before its first check)
//	live    lock.Held of the lead context was true after this time
//	write   a fenced write: details "ok" or "refused"
//	resume  the replica ran again after a gap longer than the lease (it
//	        was frozen): details "leader=<IsLeader> held=<Held>
//	        cause=<cause> (before Held: <cause>)"
//	late    the write it then made anyway, ignoring its context: details
//	        "ok" or "refused"
//	end     lead returned: details its context's cause
//	campaign a Lock call returned: details its error
type events struct{ f *os.File }

func (ev events) add(kind string, id int, token uint64, at time.Time, details string) {
	_, _ = fmt.Fprintf(ev.f, "%s %d %d %d %s\n", kind, id, token, at.UnixMicro(), details)
}

// tracedLocker adds a "campaign" event when a Lock call returns: details
// its error, or "ok".
type tracedLocker struct {
	lock.Locker
	ev events
	id int
}

func (l tracedLocker) Lock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	lctx, unlock, err := l.Locker.Lock(ctx, key, opts...)
	var token uint64
	if err == nil {
		token, _ = lock.FencingToken(lctx, key)
	}
	l.ev.add("campaign", l.id, token, time.Now(), strings.ReplaceAll(fmt.Sprint(err), " ", "_"))
	return lctx, unlock, err
}

// replica campaigns until SIGTERM, leading with fenced writes every 10 ms.
func replica(addr string, id int, lease time.Duration, file string) error {
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	ev := events{f}
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}) // a write gives up after its 200 ms
	c, err := lock.New(rdb, lock.WithOwnerLabel(fmt.Sprintf("c%d", id)))
	if err != nil {
		return err
	}
	defer c.Close()
	logf, err := os.Create(file + ".log")
	if err != nil {
		return err
	}
	_ = debug.SetCrashOutput(logf, debug.CrashOptions{}) // a panic's trace, for the test to show
	log := slog.New(slog.NewTextHandler(logf, nil))
	e, err := leader.New(tracedLocker{c, ev, id}, "fault", leader.WithLease(lease), leader.WithBackoff(20*time.Millisecond, 200*time.Millisecond), leader.WithLogger(log))
	if err != nil {
		return err
	}
	// SIGTERM ends ctx; a second one, while the replica exits, is ignored.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; stop() }()
	write := func(token uint64) string {
		wctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		n, err := fenced.Run(wctx, rdb, []string{storeKey, refusalsKey}, token, id).Int()
		switch {
		case err != nil:
			return "error"
		case n == 1:
			return "ok"
		}
		return "refused"
	}
	fmt.Println("ready")
	err = e.Run(ctx, func(lctx context.Context) error {
		key := leader.Key("fault")
		token, _ := lock.FencingToken(lctx, key)
		ev.add("start", id, token, time.Now(), "")
		// resumed records, after a gap longer than the lease since the
		// last check (the process was frozen), whether the replica still
		// thinks it leads, and makes a late write anyway.
		resumed := func(since time.Time) {
			now := time.Now()
			if now.Sub(since) <= lease {
				return
			}
			leading, before := e.IsLeader(), context.Cause(lctx) // first, before Held ends lctx
			held := lock.Held(lctx, key)                         // checks the lease's validity, and ends lctx if it ran out
			ev.add("resume", id, token, now, fmt.Sprintf("leader=%v held=%v cause=%v (before Held: %v)", leading, held, context.Cause(lctx), before))
			ev.add("late", id, token, time.Now(), write(token))
		}
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		last := time.Now()
		for {
			resumed(last)
			last = time.Now()
			if lctx.Err() != nil || !lock.Held(lctx, key) { // Held alone does not look at lctx.Err()
				break
			}
			ev.add("live", id, token, last, "")
			ev.add("write", id, token, time.Now(), write(token))
			select {
			case <-tick.C:
			case <-lctx.Done():
			}
		}
		resumed(last) // frozen between the last check's time and the check
		ev.add("end", id, token, time.Now(), strings.ReplaceAll(fmt.Sprint(context.Cause(lctx)), " ", "_"))
		return nil
	})
	if err != context.Canceled {
		return err
	}
	return nil
}
