package ginlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// buffered is the response a detached handler writes, sent by the timeout
// middlewares below only if the handler finished in time. It embeds no
// writer: a method it does not define panics, so a detached handler never
// reaches the request's own writer.
type buffered struct {
	gin.ResponseWriter
	header http.Header
	code   int
	body   bytes.Buffer
}

func newBuffered() *buffered { return &buffered{header: http.Header{}, code: http.StatusOK} }

func (b *buffered) Header() http.Header               { return b.header }
func (b *buffered) WriteHeader(code int)              { b.code = code }
func (b *buffered) WriteHeaderNow()                   {}
func (b *buffered) Write(p []byte) (int, error)       { return b.body.Write(p) }
func (b *buffered) WriteString(s string) (int, error) { return b.body.WriteString(s) }
func (b *buffered) Status() int                       { return b.code }
func (b *buffered) Size() int                         { return b.body.Len() }
func (b *buffered) Written() bool                     { return b.body.Len() > 0 }

// sendTo writes the buffered response to w.
func (b *buffered) sendTo(w http.ResponseWriter) error {
	for k, v := range b.header {
		w.Header()[k] = v
	}
	w.WriteHeader(b.code)
	_, err := w.Write(b.body.Bytes())
	return err
}

// detach is the last handler of a route, the pattern of a timeout
// middleware that wraps one handler: it runs h on a goroutine of its own
// with c.Copy() (as gin documents for goroutines) writing into a buffer,
// and answers 504 if h has not finished after d. h goes on regardless.
func detach(d time.Duration, h gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		cp := c.Copy()
		buf := newBuffered()
		cp.Writer = buf
		done := make(chan struct{})
		go func() {
			defer close(done)
			h(cp)
		}()
		select {
		case <-done:
			_ = buf.sendTo(c.Writer)
		case <-time.After(d):
			c.AbortWithStatus(http.StatusGatewayTimeout)
		}
	}
}

// detachChain is a timeout middleware that runs the rest of the chain on a
// goroutine of its own and answers 504 if it has not finished after d. A
// copy of c has no chain, so the chain runs on c itself: the 504 is
// flushed at once, and the middleware returns only once the chain is
// done, since gin reuses c after that.
func detachChain(d time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		w := c.Writer
		c.Writer = newBuffered()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.Next()
		}()
		select {
		case <-done:
			_ = c.Writer.(*buffered).sendTo(w)
		case <-time.After(d):
			w.Header().Set("Content-Length", "0")
			w.WriteHeader(http.StatusGatewayTimeout)
			w.Flush()
			<-done
		}
		c.Writer = w
	}
}

// payments is a payment handler that takes work to charge an order, past
// the timeout, and counts the charges per order.
type payments struct {
	work   time.Duration
	checks bool // follows ginlock's docs: no charge once the lock is gone

	started, finished atomic.Int32
	mu                sync.Mutex
	charges           map[string]int
	abandoned         []seen                     // what each pay that did not charge saw
	running           map[string]context.Context // the order's pay still running, its context
	unaware           int                        // pays started while one still running had a live context
}

// seen is what a pay saw of its lock when its work was done.
type seen struct {
	cause error
	held  bool
}

func (s seen) String() string { return fmt.Sprintf("cause %q, Held %v", s.cause, s.held) }

func (p *payments) pay(c *gin.Context) {
	p.started.Add(1)
	defer p.finished.Add(1)
	ctx := c.Request.Context()
	key, id := ginlock.Key(c), c.Param("id")
	p.mu.Lock()
	if prev := p.running[id]; prev != nil && prev.Err() == nil {
		p.unaware++ // the earlier pay was not told before this one got the lock
	}
	p.running[id] = ctx
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		if p.running[id] == ctx {
			delete(p.running, id)
		}
		p.mu.Unlock()
	}()
	time.Sleep(p.work) // the card network: finished whatever the client does
	if cause := context.Cause(ctx); p.checks && (errors.Is(cause, lock.ErrLost) || errors.Is(cause, lock.ErrNotHeld)) {
		p.mu.Lock()
		p.abandoned = append(p.abandoned, seen{cause, lock.Held(ctx, key)})
		p.mu.Unlock()
		return
	}
	p.mu.Lock()
	p.charges[id]++
	p.mu.Unlock()
	c.Status(http.StatusOK)
}

// payTwice pays orders 1 to 3 at once through url, each with a client
// that retries once at once after a 504, and returns the answers of the
// retries once every pay has returned.
func payTwice(t *testing.T, url string, p *payments) map[int]int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	retries := map[int]int{}
	var wg sync.WaitGroup
	for order := 1; order <= 3; order++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for attempt := 0; attempt < 2; attempt++ {
				resp, err := client.Post(url+"/orders/"+strconv.Itoa(order)+"/pay", "", nil)
				if err != nil {
					t.Errorf("order %d: %v", order, err)
					return
				}
				resp.Body.Close()
				if attempt == 1 {
					mu.Lock()
					retries[resp.StatusCode]++
					mu.Unlock()
				}
				if resp.StatusCode != http.StatusGatewayTimeout {
					return
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, 20*time.Second, "every pay to return", func() bool { return p.finished.Load() == p.started.Load() })
	return retries
}

// A timeout middleware that detaches the handler from the chain (it
// answers 504 and the handler goes on) never lets a client's retry charge
// an order a second time while the first payment runs: whether it comes
// before ginlock.New (the chain, lock included, runs on its goroutine),
// after it (the handler is told, by a cause matching lock.ErrNotHeld and
// lock.Held false, that its lock ended when the chain returned), or around
// ginlock.Wrap (the lock is taken and released on the handler's own
// goroutine), with a real redis-server and HTTP server.
func TestDetachedHandlerNeverChargesTwice(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	const timeout, work = 200 * time.Millisecond, time.Second
	for _, tc := range []struct {
		name   string
		checks bool // the handler checks its lock before charging
		route  func(r *gin.Engine, pay gin.HandlerFunc)
	}{
		{"timeout before New", false, func(r *gin.Engine, pay gin.HandlerFunc) {
			r.POST("/orders/:id/pay", detachChain(timeout), ginlock.New(locker, "orders:{id}"), pay)
		}},
		{"New before timeout", true, func(r *gin.Engine, pay gin.HandlerFunc) {
			r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), detach(timeout, pay))
		}},
		{"timeout around Wrap", false, func(r *gin.Engine, pay gin.HandlerFunc) {
			r.POST("/orders/:id/pay", detach(timeout, ginlock.Wrap(locker, "orders:{id}", pay)))
		}},
		{"timeout before Wrap", false, func(r *gin.Engine, pay gin.HandlerFunc) {
			r.POST("/orders/:id/pay", detachChain(timeout), ginlock.Wrap(locker, "orders:{id}", pay))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_ = srv.Client(t).FlushAll(context.Background()).Err()
			p := &payments{work: work, checks: tc.checks, charges: map[string]int{}, running: map[string]context.Context{}}
			r := gin.New()
			tc.route(r, p.pay)
			hs := httptest.NewServer(r)
			defer hs.Close()
			retries := payTwice(t, hs.URL, p)
			t.Logf("charges %v, retries answered %v, pays that found the lock gone: %v", p.charges, retries, p.abandoned)
			if p.unaware != 0 {
				t.Errorf("%d pays got the lock while an earlier pay of the order ran with a live context", p.unaware)
			}
			for order, n := range p.charges {
				if n > 1 {
					t.Errorf("order %s charged %d times", order, n)
				}
			}
			if !tc.checks {
				// The lock covers the whole payment: the retry is turned away.
				if retries[http.StatusConflict] != 3 || len(p.charges) != 3 {
					t.Errorf("retries answered %v, charges %v: want 3 conflicts, each order charged once", retries, p.charges)
				}
				return
			}
			if len(p.abandoned)+len(p.charges) == 0 {
				t.Fatal("no payment ran: the test proves nothing")
			}
			for _, s := range p.abandoned {
				if !errors.Is(s.cause, lock.ErrNotHeld) || s.held {
					t.Errorf("a pay whose lock ended saw cause %v, Held %v; want a cause matching lock.ErrNotHeld, Held false", s.cause, s.held)
				}
			}
		})
	}
}

// Wrap turns requests away as New does, without running the handler or
// the rest of the chain, and refuses a nil handler at registration.
func TestWrapTurnsAwayLikeNew(t *testing.T) {
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	var ran, after int
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.Wrap(locker, "orders:{id}:{query.user}", func(c *gin.Context) {
		ran++
		if !lock.Held(c.Request.Context(), ginlock.Key(c)) {
			t.Error("wrapped handler runs without the lock")
		}
	}), func(*gin.Context) { after++ })

	locktest.CheckProblem(t, post(r, "/orders/42/pay"), http.StatusBadRequest)
	_, unlock := locktest.MustLock(t, locker, context.Background(), "orders:42:alice")
	locktest.CheckProblem(t, post(r, "/orders/42/pay?user=alice"), http.StatusConflict)
	if ran != 0 || after != 0 {
		t.Fatalf("turned-away requests ran the handler %d and the rest of the chain %d times", ran, after)
	}
	_ = unlock()
	if w := post(r, "/orders/42/pay?user=alice"); w.Code != http.StatusOK || ran != 1 || after != 1 {
		t.Fatalf("status %d, handler ran %d, rest of the chain %d; want 200, 1, 1", w.Code, ran, after)
	}

	defer func() {
		if recover() == nil {
			t.Error("Wrap with a nil handler did not panic")
		}
	}()
	ginlock.Wrap(locker, "orders:{id}", nil)
}
