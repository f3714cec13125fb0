// Command gin serves POST /orders/:id/pay behind ginlock: one payment per
// order at a time across all replicas. By default it shows, against an
// embedded Redis, a request turned away while another replica pays, then
// exits; -redis (or REDIS_URL) picks a real Redis, -listen keeps serving:
//
//	go run ./examples/gin
//	go run ./examples/gin -redis redis://127.0.0.1:6379/0 -listen 127.0.0.1:8080
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/examples/internal/embedded"
	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/lock"
)

func main() {
	url := flag.String("redis", os.Getenv("REDIS_URL"), "Redis URL; empty: embedded Redis")
	listen := flag.String("listen", "", "address to serve on; empty: run the demo and exit")
	flag.Parse()
	if err := run(*url, *listen, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(url, listen string, out io.Writer) error {
	opt, stop, err := embedded.Redis(url)
	if err != nil {
		return err
	}
	defer stop()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		return err
	}
	defer locker.Close()

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	payments := &ledger{last: make(map[string]uint64)}
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		// The lock is held until this handler returns, even if the client
		// goes away, so the payment is finished once it started; the
		// fencing token lets the ledger refuse a writer whose lease ended
		// (a paused process, say).
		token, ok := ginlock.FencingToken(c)
		if !ok {
			c.Status(http.StatusServiceUnavailable) // the lease was lost
			return
		}
		if err := payments.record(c.Param("id"), token); err != nil {
			_ = c.Error(err)
			c.Status(http.StatusServiceUnavailable)
			return
		}
		c.String(http.StatusOK, "paid order %s", c.Param("id"))
	})
	if listen != "" {
		return r.Run(listen)
	}
	srv := httptest.NewServer(r)
	defer srv.Close()

	pay := func() error {
		resp, err := http.Post(srv.URL+"/orders/42/pay", "", nil)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		fmt.Fprintf(out, "%s, Retry-After %q: %s\n", resp.Status, resp.Header.Get("Retry-After"), body)
		return err
	}
	// Another replica is paying order 42: this one turns the request away.
	_, unlock, err := locker.Lock(context.Background(), "orders:42")
	if err == nil {
		err = pay()
	}
	if err == nil {
		err = unlock()
	}
	if err != nil {
		return err
	}
	return pay() // the other replica is done: this one pays
}

// ledger stands for the payment store: it accepts a write for an order
// only with a fencing token larger than the last one it saw, the check a
// database makes with a conditional UPDATE.
type ledger struct {
	mu   sync.Mutex
	last map[string]uint64 // order → fencing token of the last payment
}

func (l *ledger) record(order string, token uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if token <= l.last[order] {
		return fmt.Errorf("order %s: stale fencing token %d (last %d)", order, token, l.last[order])
	}
	l.last[order] = token
	return nil
}
