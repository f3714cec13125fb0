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

// The owner a Client writes in a lock hash reads back (ParseOwner) as its
// label, when it has one, this process's pid and this host's name (cut
// to fit); String starts with the label and the host.
func TestOwnerInRedis(t *testing.T) {
	t.Parallel()
	for _, label := range []string{"payments-7f9c", ""} {
		t.Run("label="+label, func(t *testing.T) {
			t.Parallel()
			_, rdb := newReal(t)
			var opts []lock.Option
			if label != "" {
				opts = append(opts, lock.WithOwnerLabel(label))
			}
			c := locktest.NewClient(t, rdb, opts...)
			ctx := context.Background()
			_, unlock := locktest.MustLock(t, c, ctx, "owned")
			defer unlock()
			id := rdb.HGet(ctx, "lockkit:{owned}", "o").Val()
			o := lock.ParseOwner(id)
			host, _ := os.Hostname()
			if o.Label != label || o.PID != os.Getpid() || o.Host == "" || !strings.HasPrefix(host, o.Host) {
				t.Fatalf("owner %q reads as %+v, want label %q, pid %d, host %q", id, o, label, os.Getpid(), host)
			}
			if label == "" {
				return
			}
			if got, want := o.String(), label+" "+o.Host+"/"; !strings.HasPrefix(got, want) {
				t.Fatalf("String() = %q, want prefix %q", got, want)
			}
		})
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
