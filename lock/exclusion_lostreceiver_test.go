package lock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion around a lost receiver (docs/protocol.md, "one holder" and
// "tokens strictly increase"): a waiter that lost its hand-off
// unconfirmed and then unlocks passes the key on, and what its Client sent
// during its silence, reaching Redis late, never gives the key to two
// holders at once.

// TestLostReceiverNeverSharesKey: waiter A is handed the key and its
// Client goes silent (half-open) past the claim window, so A loses the
// hand-off unconfirmed (see lostReceiver). Once the hand-off lapsed in
// Redis, A's Client answers again and A unlocks, which passes the key to
// the next waiter B; what A's Client sent during the silence (the
// watchdog's confirmation and, when B is its own, B's attempt) reaches
// Redis only after that release, racing the new hand-off. A live waiter L
// of a third Client queues behind B. Each holder keeps the key a while,
// then unlocks.
//
// Every hold's span, from its Lock's return to its unlock or its loss,
// must come after the last one's end, with a larger fencing token; B and
// L must not lose their holds; and the first of them holds the key within
// two claim windows of A's unlock. With ForceUnlock racing A's unlock the
// holder it ends may overlap the next one (ForceUnlock's contract), so
// only the tokens are checked, and that someone holds the key: every hold
// has its own, larger than that of every hold that ended before it began
// (of two that overlap, either may return from Lock first).
func TestLostReceiverNeverSharesKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		sameClient bool   // B is a waiter of A's Client
		force      string // ForceUnlock by another Client: "with" A's unlock, or "after" it
		lostReply  bool   // the reply of A's release is lost: go-redis sends it again
		leave      bool   // B's Lock is cancelled as A unlocks: B leaves the queue
	}{
		{name: "next waiter of another Client"},
		{name: "next waiter of the receiver's own Client", sameClient: true},
		{name: "ForceUnlock racing the release", force: "with"},
		{name: "ForceUnlock of the new hand-off", force: "after"},
		{name: "retried release", lostReply: true},
		{name: "retried release, next waiter of the receiver's own Client", sameClient: true, lostReply: true},
		{name: "next waiter leaving", leave: true},
		{name: "next waiter of the receiver's own Client leaving", sameClient: true, leave: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			locktest.Timed(t)
			ctx := context.Background()
			var spans *spanLog     // of the last try
			var wg *sync.WaitGroup // B's and L's holds of the last try
			var leaveB context.CancelFunc
			r := loseHandOff(t, "lost-receiver-exclusion-", func(r *lostReceiver) {
				b := r.a
				if !tc.sameClient {
					b = locktest.NewClient(t, r.srv.Client(t))
				}
				spans, wg = &spanLog{}, &sync.WaitGroup{}
				var bctx context.Context
				bctx, leaveB = context.WithCancel(ctx)
				t.Cleanup(leaveB)
				spans.hold(wg, bctx, b, r.key, "B", 1500*time.Millisecond)
				waitQueued(t, r.admin, r.key, 2)
				spans.hold(wg, ctx, locktest.NewClient(t, r.srv.Client(t)), r.key, "L", 300*time.Millisecond)
				waitQueued(t, r.admin, r.key, 3)
			}, nil)
			spans.add(span{who: "A", token: r.token, from: r.res.at, to: r.lostAt, cause: context.Cause(r.res.ctx)})
			var cut <-chan struct{}
			if tc.lostReply {
				cut = r.px.DropReply("*1\r\n:0\r\n") // release.lua's {0}
			}
			// What the silence held reaches Redis after the release below.
			r.px.Thaw(300 * time.Millisecond)
			f := locktest.NewClient(t, r.srv.Client(t))
			forced := make(chan error, 1)
			force := func() { _, err := f.ForceUnlock(ctx, r.key); forced <- err }
			if tc.force == "with" {
				go force()
			}
			if tc.leave {
				go leaveB()
			}
			if err := r.res.unlock(); !errors.Is(err, lock.ErrLost) {
				t.Errorf("unlock of the lost receiver: %v, want ErrLost", err)
			}
			unlocked := time.Now()
			if tc.force == "after" {
				force()
			}
			if tc.force != "" {
				if err := <-forced; err != nil && !errors.Is(err, lock.ErrNotHeld) {
					t.Errorf("ForceUnlock: %v", err)
				}
			}
			if cut != nil {
				select {
				case <-cut:
				default:
					t.Errorf("premise: the reply of A's release was not dropped")
				}
			}
			locktest.Within(t, locktest.Waited(wg), 60*time.Second, "B's and L's holds ended")
			if at := r.px.HeldBackUntil(); !at.After(unlocked) {
				t.Errorf("premise: what A's Client sent during the silence reached Redis %v after A's unlock, want after", at.Sub(unlocked))
			}

			var got []span
			for _, s := range spans.sorted() {
				t.Logf("%s: token %d, %v to %v after A's unlock, ended by %v (Lock: %v)", s.who, s.token, s.from.Sub(unlocked), s.to.Sub(unlocked), s.cause, s.err)
				switch {
				case s.err == nil:
					got = append(got, s)
				case !tc.leave || s.who != "B" || !errors.Is(s.err, context.Canceled): // else B left without the key
					t.Fatalf("%s: Lock: %v", s.who, s.err)
				}
			}
			if got[0].who != "A" || !errors.Is(got[0].cause, lock.ErrLost) {
				t.Fatalf("A's hold: %+v, want the first, lost", got[0])
			}
			for i, prev := range got {
				for _, s := range got[i+1:] {
					if s.token == prev.token || s.token < prev.token && !s.from.Before(prev.to) {
						t.Errorf("%s's token %d after %s's %d", s.who, s.token, prev.who, prev.token)
					}
				}
			}
			for i := 1; i < len(got); i++ {
				prev, s := got[i-1], got[i]
				if tc.force == "" && s.from.Before(prev.to) {
					t.Errorf("%s held the key from %v, while %s held it until %v (after A's unlock)", s.who, s.from.Sub(unlocked), prev.who, prev.to.Sub(unlocked))
				}
				if tc.force == "" && s.cause != nil && !(tc.leave && errors.Is(s.cause, context.Canceled)) {
					t.Errorf("%s's hold ended by %v", s.who, s.cause)
				}
			}
			if limit := twoWindows(); len(got) < 2 {
				t.Errorf("nobody held the key after A's unlock")
			} else if took := got[1].from.Sub(unlocked); took > limit {
				t.Errorf("%s held the key %v after A's unlock, want within two claim windows (%v)", got[1].who, took, limit)
			}
		})
	}
}

// span is one hold of the key: its Lock returned at from, and it ended at
// to, by its unlock (cause nil) or with its context's cause.
type span struct {
	who      string
	token    uint64
	from, to time.Time
	cause    error
	err      error // of Lock
}

// spanLog collects spans from concurrent holders.
type spanLog struct {
	mu    sync.Mutex
	spans []span
}

func (l *spanLog) add(s span) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans = append(l.spans, s)
}

// sorted returns the spans by the time their Lock returned.
func (l *spanLog) sorted() []span {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := slices.Clone(l.spans)
	slices.SortFunc(s, func(a, b span) int { return a.from.Compare(b.from) })
	return s
}

// hold runs a Lock of key by c within ctx in a goroutine counted by wg,
// keeps the key for d (less if the hold ends first) and unlocks it,
// adding its span.
func (l *spanLog) hold(wg *sync.WaitGroup, ctx context.Context, c *lock.Client, key, who string, d time.Duration) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, unlock, err := c.Lock(ctx, key, lock.WithMaxWait(20*time.Second))
		s := span{who: who, from: time.Now(), err: err}
		if err != nil {
			s.to = s.from
			l.add(s)
			return
		}
		s.token, _ = lock.FencingToken(ctx, key)
		select {
		case <-ctx.Done():
			s.to, s.cause = time.Now(), context.Cause(ctx)
			_ = unlock()
		case <-time.After(d):
			s.to = time.Now()
			if err := unlock(); err != nil {
				s.cause = err
			}
		}
		l.add(s)
	}()
}
