package otellock_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// TestQuorumEveryEnd: in quorum mode (three Redis
// masters, no queue and no fencing token), every way a call or hold ends
// brings lock.held and lock.waiting back to 0, ends every span, and,
// with tracing Redis clients, starts no trace of the Client's own work.
func TestQuorumEveryEnd(t *testing.T) {
	tel := newTelemetry(t)
	var nodes []redis.UniversalClient
	var mrs []*miniredis.Miniredis
	for range 3 {
		mr, rdb := newMini(t)
		traceRedis(tel, rdb)
		nodes = append(nodes, rdb)
		mrs = append(mrs, mr)
	}
	locker, err := lock.NewQuorum(nodes, lock.WithObserver(tel.observer(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = locker.Close() })
	ctx, request := tel.parent("request")
	everyEnd(t, tel, locker, ctx, mrs...)
	request.End()

	m := tel.collect(t)
	wantAllZero(t, m, "lock.held")
	wantAllZero(t, m, "lock.waiting")
	if started, ended := len(tel.spans.Started()), len(tel.spans.Ended()); started != ended {
		t.Errorf("%d spans started, %d ended", started, ended)
	}
	if r := roots(tel); len(r) != 1 {
		t.Errorf("root spans %v, want only the request", spanNames(r))
	}
	for _, s := range tel.ended("lock.acquire") {
		if hasAttr(s, aQueuePosition) || hasAttr(s, aToken) {
			t.Errorf("quorum lock.acquire has %v", s.Attributes())
		}
	}
}
