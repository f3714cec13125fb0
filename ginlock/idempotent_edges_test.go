package ginlock_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// TestIdempotentGinBoundBody: a middleware before Idempotent that binds
// the body with ShouldBindBodyWith (which keeps it in the context) does
// not make two bodies share a fingerprint; one that binds it with
// ShouldBind (which consumes it) gets 500, never another body's answer.
func TestIdempotentGinBoundBody(t *testing.T) {
	type payment struct {
		Amount int `json:"amount"`
	}
	for name, bind := range map[string]func(*gin.Context, any) error{
		"ShouldBindBodyWith": func(c *gin.Context, v any) error { return c.ShouldBindBodyWithJSON(v) },
		"ShouldBind":         func(c *gin.Context, v any) error { return c.ShouldBindJSON(v) },
	} {
		t.Run(name, func(t *testing.T) {
			_, rdb := locktest.NewRedis(t)
			locker := locktest.NewClient(t, rdb)
			t.Cleanup(func() { released(t) })
			var runs atomic.Int64
			r := gin.New()
			r.POST("/orders/:id/pay", func(c *gin.Context) {
				var p payment
				if err := bind(c, &p); err != nil {
					t.Errorf("bind: %v", err)
				}
				c.Set("amount", p.Amount)
			}, ginlock.Idempotent(locker, rdb), func(c *gin.Context) {
				runs.Add(1)
				c.String(http.StatusCreated, "paid %d", c.GetInt("amount"))
			})
			first := do(r, idemPay("k", `{"amount":5}`))
			second := do(r, idemPay("k", `{"amount":6}`))
			if name == "ShouldBind" {
				locktest.CheckProblem(t, first, http.StatusInternalServerError)
				locktest.CheckProblem(t, second, http.StatusInternalServerError)
				if runs.Load() != 0 {
					t.Fatalf("the handler ran %d times on a consumed body", runs.Load())
				}
				return
			}
			if first.Code != http.StatusCreated || first.Body.String() != "paid 5" {
				t.Fatalf("first %d %q", first.Code, first.Body)
			}
			locktest.CheckProblem(t, second, http.StatusUnprocessableEntity)
			if again := do(r, idemPay("k", `{"amount":5}`)); again.Header().Get(httplock.ReplayedHeader) != "true" || again.Body.String() != "paid 5" {
				t.Fatalf("retry %d %q, want paid 5 replayed", again.Code, again.Body)
			}
			if runs.Load() != 1 {
				t.Fatalf("the handler ran %d times, want 1", runs.Load())
			}
		})
	}
}

// writerTrace runs steps on c.Writer and notes what it reports after
// each.
func writerTrace(c *gin.Context) string {
	var b strings.Builder
	note := func(step string) {
		fmt.Fprintf(&b, "%s: status %d size %d written %v; ", step, c.Writer.Status(), c.Writer.Size(), c.Writer.Written())
	}
	note("start")
	c.Status(http.StatusAccepted)
	note("Status(202)")
	c.Writer.WriteHeader(http.StatusCreated)
	note("WriteHeader(201)")
	c.Writer.WriteHeaderNow()
	note("WriteHeaderNow")
	c.Writer.WriteHeader(http.StatusTeapot)
	note("WriteHeader(418) after")
	_, _ = c.Writer.WriteString("ab")
	_, _ = c.Writer.Write([]byte("cd"))
	note("4 bytes")
	return b.String()
}

// TestIdempotentGinWriterLikeGins: c.Writer under Idempotent reports
// Status, Size and Written as gin's own writer does, the chain aborted
// in the handler included.
func TestIdempotentGinWriterLikeGins(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { released(t) })
	traces := map[bool]string{}
	var after atomic.Int64
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.Idempotent(locker, rdb), func(c *gin.Context) {
		traces[c.GetHeader(httplock.IdempotencyKeyHeader) != ""] = writerTrace(c)
		c.Abort()
	}, func(c *gin.Context) { after.Add(1) })
	plain, held := do(r, idemPay("", "")), do(r, idemPay("k", ""))
	if traces[false] != traces[true] {
		t.Fatalf("c.Writer under Idempotent:\n%s\ngin's own:\n%s", traces[true], traces[false])
	}
	if plain.Code != held.Code || plain.Body.String() != held.Body.String() || held.Code != http.StatusCreated {
		t.Fatalf("answers %d %q and %d %q, want the same 201", plain.Code, plain.Body, held.Code, held.Body)
	}
	if again := do(r, idemPay("k", "")); again.Header().Get(httplock.ReplayedHeader) != "true" || again.Body.String() != "abcd" {
		t.Fatalf("retry %d %q, want the answer replayed", again.Code, again.Body)
	}
	if after.Load() != 0 {
		t.Fatal("c.Abort in the handler did not stop the chain")
	}
}

// TestIdempotentGinHijackAndStream: a handler that hijacks the
// connection or streams with c.Stream over HTTP is not stored, and runs
// again on a retry.
func TestIdempotentGinHijackAndStream(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { released(t) })
	var runs atomic.Int64
	r := gin.New()
	r.POST("/hijack", ginlock.Idempotent(locker, rdb), func(c *gin.Context) {
		runs.Add(1)
		conn, rw, err := c.Writer.Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nraw ok")
		_ = rw.Flush()
	})
	r.POST("/stream", ginlock.Idempotent(locker, rdb), func(c *gin.Context) {
		runs.Add(1)
		n := 0
		c.Stream(func(w io.Writer) bool {
			n++
			_, _ = fmt.Fprintf(w, "part %d;", n)
			return n < 3
		})
	})
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	for path, want := range map[string]string{"/hijack": "raw ok", "/stream": "part 1;part 2;part 3;"} {
		runs.Store(0)
		for i := range 2 {
			// The client may read the hijacked answer before the run lock
			// is released: a 409 then, until the release.
			var resp *http.Response
			var body []byte
			for deadline := time.Now().Add(locktest.Bound(time.Second)); ; {
				req, _ := http.NewRequest(http.MethodPost, s.URL+path, nil)
				req.Header.Set(httplock.IdempotencyKeyHeader, "k")
				var err error
				if resp, err = s.Client().Do(req); err != nil {
					t.Fatalf("%s %d: %v", path, i, err)
				}
				body, _ = io.ReadAll(bufio.NewReader(resp.Body))
				resp.Body.Close()
				if resp.StatusCode != http.StatusConflict || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if resp.StatusCode != 200 || string(body) != want || resp.Header.Get(httplock.ReplayedHeader) != "" {
				t.Fatalf("%s %d: %d %q, want 200 %q not replayed", path, i, resp.StatusCode, body, want)
			}
		}
		if runs.Load() != 2 {
			t.Fatalf("%s: the handler ran %d times, want 2: the answer was stored", path, runs.Load())
		}
	}
}

// TestIdempotentGinRecoveryInside: with gin's Recovery after Idempotent
// in the chain, a handler that panics after writing part of its answer
// is recovered before Idempotent sees the panic; the 500 Recovery sets
// comes too late for the status, but the half answer must not be stored
// and replayed.
func TestIdempotentGinRecoveryInside(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	t.Cleanup(func() { released(t) })
	var runs atomic.Int64
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.Idempotent(locker, rdb), gin.RecoveryWithWriter(io.Discard), func(c *gin.Context) {
		if runs.Add(1) == 1 {
			c.String(http.StatusOK, "half")
			panic("boom")
		}
		c.String(http.StatusOK, "paid")
	})
	do(r, idemPay("k", ""))
	released(t)
	if w := do(r, idemPay("k", "")); w.Body.String() != "paid" || w.Header().Get(httplock.ReplayedHeader) != "" {
		t.Fatalf("retry %d %q replayed=%q, want the handler to run again", w.Code, w.Body, w.Header().Get(httplock.ReplayedHeader))
	}
}
