package lock

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
)

// twoHolds returns a Client on a real Redis and the holds of two keys it
// took with a one-minute lease, so that the watchdog's own loop leaves
// them alone for the test's few milliseconds.
func twoHolds(t *testing.T) (*Client, *hold, *hold) {
	t.Helper()
	rdb := redistest.Start(t).Client(t)
	c, err := New(rdb, WithDefaultLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var hs []*hold
	for _, key := range []string{"a", "b"} {
		lctx, _, err := c.Lock(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, findLevel(lctx, c, key).h)
	}
	return c, hs[0], hs[1]
}

// runOut makes h's validity end just before now, with its next renewal
// due: as when its renewals kept failing (the last try of a lease is due
// at about a lease after the one that was confirmed, its validity ends at
// 99% of a lease less 2 ms).
func runOut(c *Client, h *hold, now time.Time) {
	h.mu.Lock()
	h.validUntil = now.Add(-time.Millisecond)
	h.mu.Unlock()
	c.wd.mu.Lock()
	c.wd.holds[h] = schedule{renew: now.Add(time.Millisecond), valid: now.Add(-time.Millisecond)}
	c.wd.mu.Unlock()
}

// The watchdog's wake-up at the end of a hold's validity also finds that
// hold's next renewal try due, and another lease's renewal due with it.
// The renewal batch waits for Redis no longer than its first validity:
// with the expired hold in it, that moment has passed, and the healthy
// lease's renewal would fail without reaching Redis. A hold that is
// ending is not renewed with others.
func TestExpiringHoldDoesNotFailItsBatch(t *testing.T) {
	t.Parallel()
	c, a, b := twoHolds(t)
	now := time.Now()
	runOut(c, a, now)
	c.wd.mu.Lock()
	s := c.wd.holds[b]
	s.renew = now.Add(time.Millisecond)
	c.wd.holds[b] = s
	c.wd.mu.Unlock()
	b.mu.Lock()
	before := b.validUntil
	b.mu.Unlock()

	batch, expired := c.wd.due(now)
	if !slices.Equal(expired, []*hold{a}) {
		t.Fatalf("expired = %v, want only the hold whose validity ran out", expired)
	}
	if slices.Contains(batch, a) {
		t.Errorf("the hold whose validity ran out is in the renewal batch with %d others", len(batch)-1)
	}
	c.wd.renewGroup(batch)
	for _, h := range expired {
		h.expire()
	}
	b.mu.Lock()
	after, end := b.validUntil, b.end
	b.mu.Unlock()
	if end != nil || !after.After(before) {
		t.Fatalf("the healthy lease was not renewed (end %v, validity moved by %v): the expired hold's validity cut its batch's wait to nothing", end, after.Sub(before))
	}
	if a.end != ErrLost || a.loss != LossNotRenewed {
		t.Fatalf("the expired hold ended with %v (%v), want ErrLost (not_renewed)", a.end, a.loss)
	}
}

// A renewal confirmed after the watchdog found the validity over, but
// before the hold was ended, keeps the hold: the watchdog schedules its
// new validity, and ends it then if nothing extends it again.
func TestRenewalBetweenDueAndExpire(t *testing.T) {
	t.Parallel()
	c, a, _ := twoHolds(t)
	now := time.Now()
	runOut(c, a, now)
	_, expired := c.wd.due(now)
	if !slices.Contains(expired, a) {
		t.Fatal("the hold whose validity ran out is not expired")
	}
	if a.renewed(time.Now(), true) {
		t.Fatal("renewal reported a loss")
	}
	a.expire()
	a.mu.Lock()
	end, valid := a.end, a.validUntil
	a.mu.Unlock()
	if end != nil {
		t.Fatalf("hold ended with %v though a renewal extended it first", end)
	}
	c.wd.mu.Lock()
	s, ok := c.wd.holds[a]
	wakeAt := c.wd.wakeAt
	c.wd.mu.Unlock()
	if !ok || !s.valid.Equal(valid) {
		t.Fatalf("watchdog schedule %+v (registered %v), want its validity at %v", s, ok, valid)
	}
	if wakeAt.IsZero() || wakeAt.After(valid) {
		t.Fatalf("watchdog wakes at %v, after the new validity %v", wakeAt, valid)
	}
	later := valid.Add(time.Millisecond)
	if _, expired := c.wd.due(later); !slices.Contains(expired, a) {
		t.Fatal("the new validity's end does not expire the hold")
	}
}
