package lock_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Owners: the label and id written in Redis, parsed back, and labels with
// separators handed off.

func TestOwnerLabelInRedis(t *testing.T) {
	t.Parallel()
	_, rdb := newReal(t)
	c := locktest.NewClient(t, rdb, lock.WithOwnerLabel("payments-7f9c"))
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "labelled")
	defer unlock()
	id := rdb.HGet(ctx, "lockkit:{labelled}", "o").Val()
	o := lock.ParseOwner(id)
	host, _ := os.Hostname()
	if o.Label != "payments-7f9c" || o.PID != os.Getpid() || o.Host == "" || !strings.HasPrefix(host, o.Host) {
		t.Fatalf("owner %q reads as %+v, want label payments-7f9c, pid %d, host %q", id, o, os.Getpid(), host)
	}
	if got, want := o.String(), "payments-7f9c "+o.Host+"/"; !strings.HasPrefix(got, want) {
		t.Fatalf("String() = %q, want prefix %q", got, want)
	}
}

func TestOwnerWithoutLabel(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "plain")
	defer unlock()
	o := lock.ParseOwner(rdb.HGet(ctx, "lockkit:{plain}", "o").Val())
	if o.Label != "" || o.PID != os.Getpid() || o.Host == "" {
		t.Fatalf("owner %+v: want host and pid, no label", o)
	}
}

func TestParseOwner(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   string
		want lock.Owner
	}{
		{"ab@web-1:42:7", lock.Owner{ID: "ab@web-1:42:7", Host: "web-1", PID: 42}},
		{"ab@web-1:42:pay:v2:7", lock.Owner{ID: "ab@web-1:42:pay:v2:7", Host: "web-1", PID: 42, Label: "pay:v2"}},
		{"0123abcd:7", lock.Owner{ID: "0123abcd:7"}},     // an older Client's
		{"ab@web-1:x:7", lock.Owner{ID: "ab@web-1:x:7"}}, // no pid
		{"", lock.Owner{}},
	} {
		if got := lock.ParseOwner(tc.id); got != tc.want {
			t.Errorf("ParseOwner(%q) = %+v, want %+v", tc.id, got, tc.want)
		}
	}
}

func TestOwnerLabelRefused(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	for _, label := range []string{"", "with space", "tab\there", "bell\a", strings.Repeat("x", lock.MaxOwnerLabel+1)} {
		c, err := lock.New(rdb, lock.WithOwnerLabel(label))
		if !errors.Is(err, lock.ErrInvalid) || !strings.Contains(err.Error(), "owner label") {
			t.Errorf("WithOwnerLabel(%q): %v, want ErrInvalid naming the label", label, err)
		}
		if c != nil {
			_ = c.Close()
		}
	}
}

// TestLabelsWithSeparatorsHandOff: labels may hold ':' and '@' (the
// separators of owner ids): hand-offs between such Clients, the
// dead-Client logic that cuts owners at their last ':', and Inspect's
// parsing still work.
func TestLabelsWithSeparatorsHandOff(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t), lock.WithOwnerLabel("a:1@b:2"))
	b := locktest.NewClient(t, srv.Client(t), lock.WithOwnerLabel("9:9"))
	_, unlock := locktest.MustLock(t, a, ctx, "sep")
	got := make(chan error, 1)
	go func() {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, u, err := b.Lock(lctx, "sep")
		if err == nil {
			err = u()
		}
		got <- err
	}()
	waitQueued(t, srv.Client(t), "sep", 1)
	info, err := b.Inspect(ctx, "sep")
	if err != nil || info.Holder.Label != "a:1@b:2" || len(info.Waiters) != 1 || info.Waiters[0].Owner.Label != "9:9" {
		t.Fatalf("Inspect: %+v %v", info, err)
	}
	start := time.Now()
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil || time.Since(start) > locktest.Bound(time.Second) {
		t.Fatalf("hand-off to the waiter: %v after %v", err, time.Since(start))
	}
}
