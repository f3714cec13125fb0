package gocronlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// leaderSweep reads every Elector's term token twice, all of the first
// reads before any of the second: a replica with the same token in both
// led throughout, so two such replicas led at once.
func leaderSweep(t *testing.T, electors []*gocronlock.Elector) (leader int) {
	t.Helper()
	first := make([]uint64, len(electors))
	for i, e := range electors {
		first[i], _ = e.Token()
	}
	leader = -1
	for i, e := range electors {
		tok, ok := e.Token()
		if !ok || tok != first[i] {
			continue
		}
		if leader >= 0 {
			t.Fatalf("replicas %d and %d led at once (tokens %d and %d)", leader, i, first[leader], tok)
		}
		leader = i
	}
	return leader
}

// TestElectorOneLeaderAtATime samples three replicas' Electors without
// pause while leadership moves: the leader's Elector closes, then the
// next leader's lock Client closes. Never two lead at once, IsLeader
// agrees with Token, and each hand-over takes less than a second.
func TestElectorOneLeaderAtATime(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	election := uniqueName()
	var electors []*gocronlock.Elector
	var clients []*lock.Client
	for range 3 {
		c := locktest.NewClient(t, rdb)
		clients = append(clients, c)
		electors = append(electors, newElector(t, c, election))
	}
	// waitLeader samples until a replica other than not leads and
	// returns it.
	waitLeader := func(not int, what string) int {
		t.Helper()
		start := time.Now()
		for {
			l := leaderSweep(t, electors)
			if l >= 0 && l != not {
				if err := electors[l].IsLeader(context.Background()); err != nil {
					// It may have lost it since: sample on.
					continue
				}
				t.Logf("%s: replica %d leads after %v", what, l, time.Since(start).Round(time.Millisecond))
				return l
			}
			if time.Since(start) > locktest.Bound(time.Second) {
				t.Fatalf("%s: no new leader within %v", what, locktest.Bound(time.Second))
			}
		}
	}
	first := waitLeader(-1, "start")
	if err := electors[first].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := electors[first].IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("closed Elector: IsLeader = %v, want ErrNotLeader", err)
	}
	if _, ok := electors[first].Token(); ok {
		t.Errorf("closed Elector has a token")
	}
	second := waitLeader(first, "leader's Elector closed")
	if err := clients[second].Close(); err != nil {
		t.Fatalf("Client.Close: %v", err)
	}
	third := waitLeader(second, "leader's Client closed")
	if third == first {
		t.Fatalf("the closed Elector %d leads again", first)
	}
	// The Elector whose Client is closed does not lead, and closes.
	for range 50 {
		leaderSweep(t, electors)
		if err := electors[second].IsLeader(context.Background()); err == nil {
			t.Fatalf("replica %d leads with its Client closed", second)
		}
	}
	if err := electors[second].Close(); err != nil {
		t.Errorf("Close after Client.Close: %v", err)
	}
}

// TestElectorCloseBeforeStart closes an Elector that never started: it
// does not lead, Close returns nil, and it can start afterwards.
func TestElectorCloseBeforeStart(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	e, err := gocronlock.NewElector(locktest.NewClient(t, rdb), uniqueName())
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close before Start = %v", err)
	}
	if err := e.IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("IsLeader before Start = %v, want ErrNotLeader", err)
	}
	if err := e.Start(); err != nil {
		t.Fatalf("Start after Close before Start: %v", err)
	}
	locktest.Eventually(t, locktest.Bound(time.Second), "leading", func() bool { return e.IsLeader(context.Background()) == nil })
	if err := e.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := e.IsLeader(context.Background()); !errors.Is(err, gocronlock.ErrNotLeader) {
		t.Errorf("IsLeader after Close = %v, want ErrNotLeader", err)
	}
}
