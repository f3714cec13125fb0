package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// pausedConfig is what the holder process of TestProcessPause is asked to
// do.
type pausedConfig struct {
	Addr  string
	Key   string
	Lease time.Duration
}

// pauseLine is one line the holder process writes on stdout.
type pauseLine struct {
	Kind  string `json:"kind"` // "held", then "wrote"
	Token uint64 `json:"token,omitempty"`
	// Set in "wrote":
	Accepted    bool   `json:"accepted,omitempty"`      // the fenced store took the write
	LiveAtWrite bool   `json:"live_at_write,omitempty"` // the lock context was not cancelled yet
	Cause       string `json:"cause,omitempty"`         // the lock context's cause after the write
	Unlock      string `json:"unlock,omitempty"`        // the UnlockFunc's error
	Err         string `json:"err,omitempty"`           // the write's Redis error
}

// runPaused is the holder process: it takes the key, says so, and then
// waits for a line on stdin before it writes to the fenced store with its
// token. The test freezes it at that point, as a long GC pause or a
// stopped VM would, just after it checked that it holds the lock.
func runPaused(cfg pausedConfig) error {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer rdb.Close()
	c, err := lock.New(rdb, lock.WithDefaultLease(cfg.Lease))
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := context.Background()
	lctx, unlock, err := c.Lock(ctx, cfg.Key)
	if err != nil {
		return err
	}
	token, _ := lock.FencingToken(lctx, cfg.Key)
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(pauseLine{Kind: "held", Token: token}); err != nil {
		return err
	}
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	res := pauseLine{Kind: "wrote", LiveAtWrite: lctx.Err() == nil}
	// The write the holder was about to make when it was frozen. It does not
	// look at lctx again: that is the point of fencing.
	res.Accepted, err = writeFenced(ctx, rdb, token, "stale")
	if err != nil {
		res.Err = err.Error()
	}
	select {
	case <-lctx.Done():
		res.Cause = context.Cause(lctx).Error()
	case <-time.After(cfg.Lease):
	}
	if err := unlock(); err != nil {
		res.Unlock = err.Error()
	}
	return out.Encode(res)
}

// TestProcessPause freezes a holder with SIGSTOP for twice its 1 s lease.
// Meanwhile another process takes the key with a higher fencing token and
// writes to a store fenced by tokens. After SIGCONT the old holder makes
// the write it was about to make: the store rejects it, and the old
// holder's context is cancelled with lock.ErrLost.
func TestProcessPause(t *testing.T) {
	t.Parallel()
	const lease = time.Second
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()

	lines := make(chan pauseLine, 2)
	holder := startChild(t, pauseEnv, pausedConfig{Addr: srv.Addr, Key: "pause", Lease: lease}, func(b []byte) {
		var l pauseLine
		if err := json.Unmarshal(b, &l); err != nil {
			l = pauseLine{Kind: "garbled", Err: string(b)}
		}
		lines <- l
	})
	next := func(kind string) pauseLine {
		t.Helper()
		select {
		case l := <-lines:
			if l.Kind != kind {
				t.Fatalf("holder wrote %+v, want %q", l, kind)
			}
			return l
		case <-holder.exited:
			t.Fatalf("holder exited: %v\n%s", holder.err, holder.stderr.Bytes())
		case <-time.After(15 * time.Second):
			t.Fatalf("no %q from the holder", kind)
		}
		return pauseLine{}
	}
	held := next("held")

	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := now()
	lctx, unlock, err := leaseClient(t, rdb, lease).Lock(ctx, "pause", lock.WithMaxWait(3*lease))
	if err != nil {
		t.Fatalf("Lock while the holder is frozen: %v", err)
	}
	took := now() - stopped
	token, _ := lock.FencingToken(lctx, "pause")
	if token <= held.Token {
		t.Fatalf("new holder's token %d is not above the frozen holder's %d", token, held.Token)
	}
	if ok, err := writeFenced(lctx, rdb, token, "fresh"); !ok || err != nil {
		t.Fatalf("new holder's write: accepted %v, %v", ok, err)
	}

	time.Sleep(time.Duration(int64(2*lease) - (now() - stopped)))
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	frozen := now() - stopped
	if _, err := io.WriteString(holder.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	wrote := next("wrote")
	if wrote.Err != "" || wrote.Accepted {
		t.Errorf("stale write with token %d: accepted %v, error %q; want it rejected", held.Token, wrote.Accepted, wrote.Err)
	}
	if wrote.Cause != lock.ErrLost.Error() || wrote.Unlock != lock.ErrLost.Error() {
		t.Errorf("frozen holder: context cause %q, unlock %q; want both %q", wrote.Cause, wrote.Unlock, lock.ErrLost)
	}
	if v, err := rdb.HGet(ctx, fencedStore, "value").Result(); v != "fresh" || err != nil {
		t.Errorf("store value = %q (%v), want the new holder's", v, err)
	}
	if err := unlock(); err != nil {
		t.Errorf("new holder's unlock: %v", err)
	}
	t.Logf("holder frozen %s with token %d; another process took the key after %s with token %d; "+
		"after SIGCONT the holder's context was %s at its write, which the store rejected",
		ms(frozen), held.Token, ms(took), token, liveWord(wrote.LiveAtWrite))
}

func liveWord(live bool) string {
	if live {
		return "still live"
	}
	return "already cancelled"
}
