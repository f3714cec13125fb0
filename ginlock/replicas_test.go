package ginlock_test

import (
	"context"
	"math/rand/v2"
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

// Two replicas (separate lock Clients on one Redis), a short lease renewed
// by the watchdog, slow handlers that finish deliberately whatever the
// client does, clients that give up early and retry: never two handlers
// for one order at once.
func TestTwoReplicasSlowHandlersWithDisconnectsNeverOverlap(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 300 * time.Millisecond // renewed every 100 ms
	var inside, overlaps, ran atomic.Int32
	pay := func(c *gin.Context) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		ran.Add(1)
		// Past the lease, whatever the client does.
		d := time.Duration(20+rand.IntN(500)) * time.Millisecond
		time.Sleep(d)
		inside.Add(-1)
		c.Status(http.StatusOK)
	}
	var servers [2]*httptest.Server
	for i := range servers {
		r := gin.New()
		locker := locktest.NewClient(t, srv.Client(t))
		opts := []ginlock.Option{ginlock.WithLockOptions(lock.WithLease(lease))}
		r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}", opts...), pay)
		r.POST("/orders/:id/pay-wait", ginlock.New(locker, "orders:{id}", append(opts, ginlock.WithWait(400*time.Millisecond))...), pay)
		servers[i] = httptest.NewServer(r)
		defer servers[i].Close()
	}
	deadline := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	codes := map[string]int{}
	var mu sync.Mutex
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				s := servers[(g+i)%2]
				path := "/orders/42/pay"
				if i%3 == 0 {
					path += "-wait"
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(30+rand.IntN(300))*time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, nil)
				resp, err := s.Client().Do(req)
				code := "gave up"
				if err == nil {
					code = strconv.Itoa(resp.StatusCode)
					resp.Body.Close()
				}
				cancel()
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("answers %v, handlers run %d", codes, ran.Load())
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d handlers ran while another handler of the same order was running", n)
	}
	if ran.Load() < 3 {
		t.Fatalf("only %d handlers ran: the test proves nothing", ran.Load())
	}
	for code := range codes {
		if code != "200" && code != "409" && code != "gave up" {
			t.Errorf("unexpected answer %s", code)
		}
	}
}

// Fencing tokens strictly increase across requests served by two replicas.
func TestFencingTokensIncreaseAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	var replicas [2]*gin.Engine
	var tokens []uint64
	for i := range replicas {
		replicas[i] = gin.New()
		replicas[i].POST("/orders/:id/pay", ginlock.New(locktest.NewClient(t, srv.Client(t)), "orders:{id}"), func(c *gin.Context) {
			tok, ok := ginlock.FencingToken(c)
			if !ok {
				t.Error("no fencing token in the handler")
			}
			tokens = append(tokens, tok)
		})
	}
	for i := range 20 {
		if w := post(replicas[i%2], "/orders/a:b/pay"); w.Code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, w.Code)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v do not strictly increase", tokens)
		}
	}
}
