package httplock

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestIdempotentStoreReplyLostRunsOnce keeps answers through a proxy
// (the run lock's Redis calls go direct) and breaks the connection of
// the first store: its reply is lost and the connection cut (the script
// ran), or the connection goes half-open (the script never reaches
// Redis; the store times out). Either way the client gets the handler's
// answer, a retried store stores it once (it finds its own token, or
// writes it), the retries end and a retry of the request is replayed:
// the handler ran once, and the log says the answer was stored.
func TestIdempotentStoreReplyLostRunsOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  func(p *locktest.Proxy, answerKey string) <-chan struct{}
	}{
		{"reply lost", func(p *locktest.Proxy, _ string) <-chan struct{} { return p.DropReply(":1\r\n") }},
		{"half-open", func(p *locktest.Proxy, answerKey string) <-chan struct{} { return p.LoseFirst(answerKey) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newIdemEnv(t)
			proxy := locktest.StartProxy(t, e.srv.Addr)
			// No retry of go-redis's own: the middleware's is under test.
			answers := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1,
				ContextTimeoutEnabled: redistest.ContextTimeout()})
			t.Cleanup(func() { _ = answers.Close() })
			answerKey, _ := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
			var logs locktest.SyncBuffer
			var runs atomic.Int64
			broken := make(chan (<-chan struct{}), 1)
			s := replica(t, e, answers, func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				broken <- tc.cut(proxy, answerKey) // the reads of the answer are done
				_, _ = io.WriteString(w, "paid")
			}, WithStoreTimeout(300*time.Millisecond), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			resp, body, err := post(context.Background(), s, "k", "b")
			if err != nil || resp.StatusCode != http.StatusOK || body != "paid" {
				t.Fatalf("first request: %v %v %q, want the handler's answer", resp, err, body)
			}
			locktest.Within(t, <-broken, time.Second, "the store's connection broken")
			e.checkOutcomes(t, "store-failed")
			waitReleased(t)
			checkStallLogs(t, logs.String(), "storing an idempotent answer failed", "idempotent answer stored after retrying")
			resp, body, err = post(context.Background(), s, "k", "b")
			if err != nil || resp.StatusCode != http.StatusOK || body != "paid" || resp.Header.Get(ReplayedHeader) != "true" || runs.Load() != 1 {
				t.Fatalf("retry: %v %v %q after %d runs, want the answer replayed after 1 run", resp, err, body, runs.Load())
			}
		})
	}
}
