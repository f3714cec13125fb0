package ginlock_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestReplicasExcludeEachOther sends 200 concurrent requests for one order
// to two gin engines, each with its own Redis connection pool and lock
// Client, as two replicas behind a load balancer would get them.
func TestReplicasExcludeEachOther(t *testing.T) {
	srv := redistest.Start(t)
	for _, tt := range []struct {
		name string
		opts []ginlock.Option
	}{
		{"answer at once", nil},
		{"wait", []ginlock.Option{ginlock.WithWait(30 * time.Second)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var inside, overlaps atomic.Int32
			pay := func(c *gin.Context) {
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // the critical section
				inside.Add(-1)
				c.Status(http.StatusOK)
			}
			var replicas [2]*gin.Engine
			for i := range replicas {
				replicas[i] = gin.New()
				replicas[i].POST("/orders/:id/pay", ginlock.New(locktest.NewClient(t, srv.Client(t)), "orders:{id}", tt.opts...), pay)
			}

			const requests = 200
			var wg sync.WaitGroup
			codes := make(chan int, requests)
			start := make(chan struct{})
			for i := range requests {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					codes <- post(replicas[i%2], "/orders/42/pay").Code
				}()
			}
			close(start)
			wg.Wait()
			close(codes)

			count := map[int]int{}
			for code := range codes {
				count[code]++
			}
			if n := overlaps.Load(); n != 0 {
				t.Errorf("%d requests entered the critical section while another was in it", n)
			}
			if count[http.StatusOK]+count[http.StatusConflict] != requests || count[http.StatusOK] == 0 {
				t.Errorf("status counts %v: want only 200 and 409, at least one 200", count)
			}
			if tt.opts != nil && count[http.StatusOK] != requests {
				t.Errorf("status counts %v: with a wait every request should get 200", count)
			}
			t.Logf("status counts %v", count)
		})
	}
}
