package lock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// TestLostReceiverNeverSharesKey (exclusion, docs/protocol.md "one
// holder" and "tokens strictly increase"): waiter A is handed the key and
// its Client goes silent (half-open) past the claim window, so A loses the
// hand-off unconfirmed. Once the hand-off lapsed in Redis, A's Client
// answers again and A unlocks, which passes the key to the next waiter B;
// what A's Client sent during the silence (the watchdog's confirmation
// and, when B is its own, B's attempt) reaches Redis only after that
// release, racing the new hand-off. A live waiter L of a third Client
// queues behind B. Each holder keeps the key a while, then unlocks.
//
// Every hold's span, from its Lock's return to its unlock or its loss,
// must come after the last one's end, with a larger fencing token; B and
// L must not lose their holds; and the first of them holds the key within
// two claim windows of A's unlock. With ForceUnlock racing A's unlock the
// holder it ends may overlap the next one (ForceUnlock's contract), so
// only the tokens are checked, and that someone holds the key.
func TestLostReceiverNeverSharesKey(t *testing.T) {
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
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := context.Background()
			key := "review-exclusion-" + randKey()
			rk := redisKeysOf(key)

			x := newLockClient(t, srv.Client(t))
			_, unlockX, err := x.Lock(ctx, key, lock.WithLease(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			px := startProxy(t, srv.Addr)
			a := newLockClient(t, px.client(t))
			gotA := lockInBackground(a, ctx, key, lock.WithMaxWait(30*time.Second))
			waitQueueLen(t, rdb, rk, 1)
			b := a
			if !tc.sameClient {
				b = newLockClient(t, srv.Client(t))
			}
			var spans spanLog
			var wg sync.WaitGroup
			bctx, leaveB := context.WithCancel(ctx)
			defer leaveB()
			spans.hold(&wg, bctx, b, key, "B", 1500*time.Millisecond)
			waitQueueLen(t, rdb, rk, 2)
			spans.hold(&wg, ctx, newLockClient(t, srv.Client(t)), key, "L", 300*time.Millisecond)
			waitQueueLen(t, rdb, rk, 3)
			queue := rdb.LRange(ctx, rk.queue, 0, -1).Val()

			if err := unlockX(); err != nil { // hands the key to A
				t.Fatal(err)
			}
			handed := time.Now()
			resA := <-gotA
			px.freeze()
			if resA.err != nil {
				px.thaw()
				t.Fatalf("A: %v", resA.err)
			}
			tokA, _ := lock.FencingToken(resA.ctx, key)
			<-resA.ctx.Done()
			spans.add(span{who: "A", token: tokA, from: resA.at, to: time.Now(), cause: context.Cause(resA.ctx)})
			waitGone(t, rdb, rk.hash, handed.Add(3*claim))
			if !rdb.HExists(ctx, rk.waits, queue[0]).Val() {
				px.thaw()
				t.Fatalf("premise: A (%s) no longer waits %v after the hand-off", queue[0], time.Since(handed))
			}
			var cut <-chan struct{}
			if tc.lostReply {
				cut = px.dropReply("*1\r\n:0\r\n") // release.lua's {0}
			}
			// What the silence held reaches Redis after the release below.
			px.thawLate(300 * time.Millisecond)
			f := newLockClient(t, srv.Client(t))
			forced := make(chan error, 1)
			force := func() { _, err := f.ForceUnlock(ctx, key); forced <- err }
			if tc.force == "with" {
				go force()
			}
			if tc.leave {
				go leaveB()
			}
			if err := resA.unlock(); !errors.Is(err, lock.ErrLost) {
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
			wg.Wait()
			if at := px.heldSentAt(); !at.After(unlocked) {
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
			for i := 1; i < len(got); i++ {
				prev, s := got[i-1], got[i]
				if s.token <= prev.token {
					t.Errorf("%s's token %d after %s's %d", s.who, s.token, prev.who, prev.token)
				}
				if tc.force == "" && s.from.Before(prev.to) {
					t.Errorf("%s held the key from %v, while %s held it until %v (after A's unlock)", s.who, s.from.Sub(unlocked), prev.who, prev.to.Sub(unlocked))
				}
				if tc.force == "" && s.cause != nil && !(tc.leave && errors.Is(s.cause, context.Canceled)) {
					t.Errorf("%s's hold ended by %v", s.who, s.cause)
				}
			}
			if took := got[1].from.Sub(unlocked); took > 2*claim {
				t.Errorf("%s held the key %v after A's unlock, want within two claim windows", got[1].who, took)
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
