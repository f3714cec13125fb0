package ginlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// When Redis stalls while handlers run, a handler that finished gets its
// answer to the client at once: the release goes on in the background,
// where it ends within the lock Client's bound for an unlock while Redis
// is still stalled, and the key is free again once Redis answers.
func TestFinishedHandlerAnsweredWhileRedisStalls(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	const n = 4
	entered := make(chan struct{}, n)
	stalled := make(chan struct{})
	var mu sync.Mutex
	finished := map[string]time.Time{}
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if c.Query("warm") == "" {
			entered <- struct{}{}
			<-stalled
			time.Sleep(100 * time.Millisecond) // work that needs no Redis
		}
		c.String(http.StatusOK, "paid")
		mu.Lock()
		finished[c.Param("id")] = time.Now()
		mu.Unlock()
	})
	hs := httptest.NewServer(r)
	defer hs.Close()
	for i := range n { // connections and scripts ready
		resp, err := hs.Client().Post(hs.URL+"/orders/"+strconv.Itoa(i)+"/pay?warm=1", "", nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("warm-up: %v %v", resp, err)
		}
		resp.Body.Close()
	}

	type answer struct {
		id   string
		code int
		at   time.Time
	}
	answers := make(chan answer, n)
	for i := range n {
		go func() {
			id := strconv.Itoa(i)
			resp, err := hs.Client().Post(hs.URL+"/orders/"+id+"/pay", "", nil)
			if err != nil {
				t.Errorf("order %s: %v", id, err)
				answers <- answer{id: id}
				return
			}
			resp.Body.Close()
			answers <- answer{id, resp.StatusCode, time.Now()}
		}()
	}
	for range n {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("handlers did not start")
		}
	}
	srv.Pause()
	t.Cleanup(srv.Resume)
	close(stalled)
	var delays []time.Duration
	for range n {
		a := <-answers
		mu.Lock()
		done := finished[a.id]
		mu.Unlock()
		if a.code != http.StatusOK {
			t.Fatalf("order %s: status %d, want 200", a.id, a.code)
		}
		delays = append(delays, a.at.Sub(done))
	}
	slices.Sort(delays)
	t.Logf("handler returned -> answer received, Redis stalled: %v", delays)
	if worst := delays[n-1]; worst > 400*time.Millisecond {
		t.Errorf("an answer came %v after its handler returned: it waited for the release", worst)
	}

	// The releases end while Redis is still stalled, bounded by the lock
	// Client's unlock (1 s); nothing waits for Redis forever.
	start := time.Now()
	waitFor(t, 3*time.Second, "the background releases to end on a stalled Redis", func() bool { return ginlock.ReleasesInFlight() == 0 })
	t.Logf("background releases ended %v after the answers, Redis still stalled", time.Since(start))

	srv.Resume()
	for i := range n {
		waitFor(t, 5*time.Second, "the key to be free after Redis resumed", func() bool {
			return post(r, "/orders/"+strconv.Itoa(i)+"/pay?warm=1").Code == http.StatusOK
		})
	}
}

// slowRelease is a Locker whose releases take d longer.
type slowRelease struct {
	lock.Locker
	d time.Duration
}

func (s slowRelease) TryLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	lctx, unlock, err := s.Locker.TryLock(ctx, key, opts...)
	if err != nil {
		return lctx, unlock, err
	}
	return lctx, func() error { time.Sleep(s.d); return unlock() }, nil
}

// The answer waits for its release only briefly: a quick release ends
// before the client reads the answer, so the client's next request finds
// the key free; a slow one (a stalled Redis) holds the answer back by
// 100 ms at most, and goes on in the background.
func TestAnswerWaitsForAQuickReleaseOnly(t *testing.T) {
	srv := redistest.Start(t)
	client := locktest.NewClient(t, srv.Client(t))
	for _, tc := range []struct {
		name        string
		release     time.Duration
		inFlight    int           // releases still running after the answer
		least, most time.Duration // from the call to the answer
	}{
		{"quick release", 30 * time.Millisecond, 0, 30 * time.Millisecond, 30*time.Millisecond + time.Second},
		{"slow release", 600 * time.Millisecond, 1, 100 * time.Millisecond, 600 * time.Millisecond},
	} {
		r := gin.New()
		r.POST("/orders/:id/pay", ginlock.New(slowRelease{client, tc.release}, "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
		start := time.Now()
		w := post(r, "/orders/42/pay")
		took := time.Since(start)
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d, want 200", tc.name, w.Code)
		}
		if n := ginlock.ReleasesInFlight(); n != tc.inFlight {
			t.Errorf("%s: %d releases in flight after the answer, want %d", tc.name, n, tc.inFlight)
		}
		if took < tc.least || took > tc.most {
			t.Errorf("%s: answered after %v, want %v to %v", tc.name, took, tc.least, tc.most)
		}
		released(t)
	}
}

// A middleware's deadline on the request (30 s here) does not stretch
// the background release on a stalled Redis: it ends within the lock
// Client's release timeout (1 s), while the handler's context still has
// the request's deadline.
func TestBackgroundReleaseBoundedWhateverTheRequestDeadline(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	var want, got time.Time
	r := gin.New()
	r.Use(func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 30*time.Second)
		defer cancel()
		want, _ = ctx.Deadline()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	})
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		got, _ = c.Request.Context().Deadline()
		if c.Query("stall") != "" {
			srv.Pause()
		}
		c.Status(http.StatusOK)
	})
	if w := post(r, "/orders/1/pay"); w.Code != http.StatusOK { // warm up
		t.Fatalf("status %d", w.Code)
	}
	released(t)
	t.Cleanup(srv.Resume)
	if w := post(r, "/orders/1/pay?stall=1"); w.Code != http.StatusOK {
		t.Fatalf("status %d", w.Code)
	}
	if !got.Equal(want) {
		t.Errorf("handler's context deadline %v, want the request's %v", got, want)
	}
	start := time.Now()
	waitFor(t, 3*time.Second, "the background release to end on a stalled Redis", func() bool { return ginlock.ReleasesInFlight() == 0 })
	t.Logf("background release ended %v after the answer", time.Since(start))
}
