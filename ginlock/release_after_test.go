package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// Two lock Clients on two Redis servers are two lock spaces: a release in
// flight on one (stalled) Redis does not hold back a request for the same
// key string on the other Client, whose Redis answers at once.
func TestReleaseWaitIsolatedBetweenClients(t *testing.T) {
	srvA, srvB := redistest.Start(t), redistest.Start(t)
	lockerA := locktest.NewClient(t, srvA.Client(t))
	lockerB := locktest.NewClient(t, srvB.Client(t))
	ok := func(c *gin.Context) { c.Status(http.StatusOK) }
	r := gin.New()
	r.POST("/a/orders/:id/pay", ginlock.New(lockerA, "orders:{id}"), func(c *gin.Context) {
		if c.Query("stall") != "" {
			srvA.Pause() // the release after this answer finds Redis A stalled
		}
		c.Status(http.StatusOK)
	})
	// A generous bound, so that a wait for A's release shows.
	r.POST("/b/orders/:id/pay", ginlock.New(lockerB, "orders:{id}", ginlock.WithAcquireTimeout(4*time.Second)), ok)
	for _, p := range []string{"/a/orders/1/pay", "/b/orders/1/pay"} { // connections and scripts ready
		if w := post(r, p); w.Code != http.StatusOK {
			t.Fatalf("warm-up %s: status %d", p, w.Code)
		}
	}
	released(t)
	t.Cleanup(srvA.Resume)

	if w := post(r, "/a/orders/1/pay?stall=1"); w.Code != http.StatusOK {
		t.Fatalf("A: status %d, want 200", w.Code)
	}
	if n := ginlock.ReleasesInFlight(); n != 1 {
		t.Fatalf("%d releases in flight after A's answer, want A's", n)
	}
	start := time.Now()
	w := post(r, "/b/orders/1/pay")
	took := time.Since(start)
	if w.Code != http.StatusOK {
		t.Fatalf("B: status %d, want 200", w.Code)
	}
	const bound = 300 * time.Millisecond // a round trip to B is a few ms
	if took > bound {
		t.Errorf("B, whose Redis answers, answered after %v, want within %v: it waited for Client A's release on stalled Redis A", took, bound)
	}
	srvA.Resume()
	released(t)
}

// No goroutine of the middleware outlives the lock Client's Close, also
// when releases are stuck on a stalled Redis as Close is called: once
// Close has returned, no background release of a request is left. (The
// release's unlock keeps its own 1 s bound on a single node, which Close
// cuts; Close may return at its 800 ms deadline before that bound.)
//
// With go-redis's ContextTimeoutEnabled the unlock is a lone call on the
// release's goroutine, which Close's cancellation does not stop: it ends
// when go-redis gives up, at the unlock's own deadline (docs/operations.md,
// "go-redis client settings"). The release is then gone within that 1 s
// bound of its start, not at Close.
func TestNoReleaseOutlivesCloseOnStalledRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	locker, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = locker.Close()
		}
	})
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if c.Query("stall") != "" {
			srv.Pause()
		}
		c.Status(http.StatusOK)
	})
	if w := post(r, "/orders/0/pay"); w.Code != http.StatusOK {
		t.Fatalf("warm-up: status %d", w.Code)
	}
	released(t)
	t.Cleanup(srv.Resume)
	if w := post(r, "/orders/1/pay?stall=1"); w.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", w.Code)
	}
	answered := time.Now() // the release began before
	if n := ginlock.ReleasesInFlight(); n != 1 {
		t.Fatalf("%d releases in flight, want 1", n)
	}
	start := time.Now()
	_ = locker.Close()
	closed = true
	took := time.Since(start)
	if redistest.ContextTimeout() {
		limit := answered.Add(time.Second + locktest.Bound(100*time.Millisecond))
		for ginlock.ReleasesInFlight() > 0 && time.Now().Before(limit) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	n := ginlock.ReleasesInFlight()
	srv.Resume()
	if n != 0 {
		t.Errorf("%d background releases still running (Close took %v, the answer came %v before Close returned)", n, took, time.Since(answered))
	}
	released(t)
}

// advReplicaEnv makes the test binary a replica of its own process
// instead of running tests: "redisAddr,port" (see serveReplica).
const advReplicaEnv = "LOCKKIT_ADV_REPLICA"

func init() {
	if v := os.Getenv(advReplicaEnv); v != "" {
		os.Exit(serveReplica(v))
	}
}

// serveReplica serves POST /orders/:id/pay under ginlock.New on the
// loopback port of spec, with a lock Client of the Redis at its address,
// until killed.
func serveReplica(spec string) int {
	addr, port, _ := strings.Cut(spec, ",")
	gin.SetMode(gin.ReleaseMode)
	locker, err := lock.New(redis.NewClient(&redis.Options{Addr: addr}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("serving")
	_ = http.Serve(ln, r)
	return 1
}

// The lock is held exactly while the handler chain runs: a client whose
// request was answered, and that sends its next request for the same key
// through another replica (another process, as behind a load balancer),
// is never turned away by the request it already has the answer to.
func TestNextRequestOnAnotherReplicaNotTurnedAway(t *testing.T) {
	srv := redistest.Start(t)
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locktest.NewClient(t, srv.Client(t)), "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
	local := httptest.NewServer(r)
	defer local.Close()
	port := redistest.FreePort(t)
	locktest.StartChild(t, advReplicaEnv+"="+srv.Addr+","+strconv.Itoa(port), "serving")
	urls := [2]string{local.URL, "http://127.0.0.1:" + strconv.Itoa(port)}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func(url string) int {
		resp, err := client.Post(url+"/orders/7/pay", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, u := range urls { // connections and scripts ready
		for range 3 {
			send(u)
			time.Sleep(50 * time.Millisecond)
		}
	}
	const n = 60
	turnedAway := map[int]int{}
	for i := range n {
		if code := send(urls[i%2]); code != http.StatusOK {
			turnedAway[code]++
		}
	}
	if len(turnedAway) != 0 {
		t.Errorf("of %d requests sent one after the other's answer, alternating replicas, %v were turned away", n, turnedAway)
	}
	released(t)
}

// A goroutine started with c.Copy() that outlives its handler, while gin
// reuses c for the next requests, is told the lock ended (a cause
// matching lock.ErrNotHeld, no fencing token), keeps its copy's key and
// values, and reads nothing the middleware writes to c afterwards (run
// with -race).
func TestCopyOutlivingHandlerToldAndUntouched(t *testing.T) {
	srv := redistest.Start(t)
	locker := locktest.NewClient(t, srv.Client(t))
	type seen struct {
		key, user string
		tokenOK   bool
		cause     error
	}
	res := make(chan seen, 1)
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("user", c.Query("user")); c.Next() })
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		if c.Query("bg") == "" {
			c.Status(http.StatusOK)
			return
		}
		cp := c.Copy()
		go func() {
			ctx := cp.Request.Context()
			<-ctx.Done()
			time.Sleep(50 * time.Millisecond) // gin serves other requests with c meanwhile
			_, ok := ginlock.FencingToken(cp)
			res <- seen{ginlock.Key(cp), cp.GetString("user"), ok, context.Cause(ctx)}
		}()
		c.Status(http.StatusOK)
	})
	hs := httptest.NewServer(r)
	defer hs.Close()
	resp, err := hs.Client().Post(hs.URL+"/orders/1/pay?bg=1&user=alice", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for range 20 { // reuse c
		resp, err := hs.Client().Post(hs.URL+"/orders/2/pay?user=bob", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	s := <-res
	if s.key != "orders:1" || s.user != "alice" {
		t.Errorf("copy saw key %q user %q, want orders:1 and alice", s.key, s.user)
	}
	if s.tokenOK {
		t.Error("copy still has a fencing token after the lock ended")
	}
	if !errors.Is(s.cause, lock.ErrNotHeld) {
		t.Errorf("copy's context cause %v, want one matching lock.ErrNotHeld", s.cause)
	}
	released(t)
}
