package httplock

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replyError is an error reply of Redis, as go-redis returns it.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestIdempotentRetryableStoreErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.DeadlineExceeded, true},
		{io.EOF, true},
		{redis.ErrPoolTimeout, true},
		{fmt.Errorf("dial: %w", io.ErrUnexpectedEOF), true},
		{replyError("LOADING Redis is loading the dataset in memory"), true},
		{replyError("READONLY You can't write against a read only replica."), true},
		{replyError("BUSY Redis is busy running a script."), true},
		{replyError("TRYAGAIN Multiple keys request during rehashing of slot"), true},
		{replyError("CLUSTERDOWN The cluster is down"), true},
		{replyError("MASTERDOWN Link with MASTER is down"), true},
		{redis.ErrNoScript, true},
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), false},
		{replyError("ERR Error running script"), false},
		{redis.ErrClosed, false},
		{fmt.Errorf("store: %w", redis.ErrClosed), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%q) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestIdempotentStoreRefusedByRedisNotRetried stores an answer where
// Redis answers with an error that does not pass (a key of another type
// holds the answer's name): the run lock is released at once, without a
// retry.
func TestIdempotentStoreRefusedByRedisNotRetried(t *testing.T) {
	e := newIdemEnv(t)
	answer, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		if err := e.rdb.Set(context.Background(), answer, "not a hash", time.Minute).Err(); err != nil {
			t.Error(err)
		}
		_, _ = io.WriteString(w, "paid")
	})
	if w := serve(h, pay("1", "k", "")); w.Code != http.StatusOK || w.Body.String() != "paid" {
		t.Fatalf("answer %d %q, want the handler's", w.Code, w.Body)
	}
	e.checkOutcomes(t, "store-failed")
	if n := retrying.Load(); n != 0 {
		t.Fatalf("%d stores being retried after a WRONGTYPE reply, want none", n)
	}
	waitReleased(t)
	_, unlock, err := e.locker.TryLock(context.Background(), run)
	if err != nil {
		t.Fatalf("the run lock is held after the refused store: %v", err)
	}
	_ = unlock()
}
