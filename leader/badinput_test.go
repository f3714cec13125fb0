package leader_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

// refused runs call, turning a panic into an error, and fails t unless
// call returned an error matching lock.ErrInvalid.
func refused(t *testing.T, what string, call func() error) {
	t.Helper()
	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return call()
	}()
	if !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("%s: %v, want an error matching lock.ErrInvalid", what, err)
	}
}

// TestBadCallsAreInvalidAndChangeNothing: the invalid calls that
// TestBadInputIsInvalid does not make (a nil option, a typed nil Client,
// a nil or empty argument of Current or Observe) are refused with an
// error matching lock.ErrInvalid, or for Observe a channel closed at
// once, without a panic and without a key written to Redis.
func TestBadCallsAreInvalidAndChangeNothing(t *testing.T) {
	t.Parallel()
	r, _ := newRedis(t)
	c := replicas(t, r, 1)[0]
	ctx, cancel := context.WithTimeout(context.Background(), locktest.Bound(2*time.Second))
	defer cancel()
	lead := func(ctx context.Context) error { <-ctx.Done(); return nil }
	var nilClient *lock.Client
	refused(t, "New with a nil option", func() error {
		_, err := leader.New(c, "x", leader.WithLease(time.Second), nil)
		return err
	})
	refused(t, "Run with a nil option", func() error { return leader.Run(ctx, c, "x", lead, nil) })
	refused(t, "New with a typed nil *lock.Client", func() error {
		_, err := leader.New(nilClient, "x")
		return err
	})
	refused(t, "Run with a typed nil *lock.Client", func() error { return leader.Run(ctx, nilClient, "x", lead) })
	refused(t, "Current with a nil Inspector", func() error {
		_, err := leader.Current(ctx, nil, "x")
		return err
	})
	refused(t, "Current with a typed nil *lock.Client", func() error {
		_, err := leader.Current(ctx, nilClient, "x")
		return err
	})
	refused(t, "Current with an empty name", func() error {
		_, err := leader.Current(ctx, c, "")
		return err
	})
	for _, tc := range []struct {
		what string
		in   leader.Inspector
		name string
	}{
		{"a nil Inspector", nil, "x"},
		{"a typed nil *lock.Client", nilClient, "x"},
		{"an empty name", c, ""},
	} {
		ch := leader.Observe(ctx, tc.in, tc.name, time.Millisecond)
		closed := make(chan struct{})
		go func() {
			for info := range ch {
				t.Errorf("Observe with %s sent %+v", tc.what, info)
			}
			close(closed)
		}()
		if !locktest.ClosedWithin(closed, locktest.Bound(time.Second)) {
			t.Errorf("Observe with %s: its channel is still open after %v", tc.what, locktest.Bound(time.Second))
			cancel()
			<-closed
		}
	}
	if ctx.Err() != nil {
		t.Errorf("the bad calls took the context's %v", locktest.Bound(2*time.Second))
	}
	if keys := r.Keys(); len(keys) != 0 {
		t.Errorf("the bad calls left keys in Redis: %v", keys)
	}
}
