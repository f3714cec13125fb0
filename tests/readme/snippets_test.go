package readme_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/gocronlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/locktest"
	"github.com/lockkit/lockkit/otellock"
)

// Each function below holds one Go block of README.md, word for word; its
// parameters are what the block takes from around it.

func theLock(ctx context.Context, addr string, pay func(context.Context) error) error {
	// ContextTimeoutEnabled lets go-redis stop a call at its deadline, so a
	// lone lock call needs no goroutine hand-off (docs/operations.md).
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	locker, err := lock.New(rdb) // or a *redis.ClusterClient
	if err != nil {
		return err
	}
	defer locker.Close()

	ctx, unlock, err := locker.Lock(ctx, "orders:42") // waits; TryLock does not
	if err != nil {
		return err // lock.ErrNotObtained, lock.ErrClosed, a Redis error, ...
	}
	defer unlock()
	return pay(ctx) // ctx is cancelled with cause lock.ErrLost if the lease is lost
}

func permits(ctx context.Context, locker *lock.Client, tenant string, report func(context.Context) error) error {
	ctx, release, err := locker.Acquire(ctx, "reports:"+tenant, 3) // TryAcquire does not wait
	if err != nil {
		return err
	}
	defer release()
	return report(ctx) // RLock(ctx, "config") and Lock(ctx, "config") read and write
}

func ginRoutes(locker *lock.Client, pay, report gin.HandlerFunc) *gin.Engine {
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), pay)
	r.POST("/exports", ginlock.Limit(locker, "exports:{header.X-Tenant}", 3), report) // 3 per tenant at once

	// Wait up to 2 s instead of answering 409; lock per authenticated user.
	r.POST("/reports", ginlock.New(locker, "reports:{value.user}",
		ginlock.WithWait(2*time.Second),
		ginlock.WithValue("user", func(c *gin.Context) string { return c.GetString("user") }),
	), report)
	return r
}

func httpRoutes(locker *lock.Client, refund http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/refund", httplock.New(locker, "orders:{id}")(refund))
	return mux
}

func idempotentRoutes(r *gin.Engine, mux *http.ServeMux, locker *lock.Client, rdb *redis.Client, pay gin.HandlerFunc, payHandler http.Handler) {
	r.POST("/orders/:id/pay", ginlock.Idempotent(locker, rdb, httplock.WithKeyRequired(),
		ginlock.IdempotencyScope(func(c *gin.Context) string { return c.GetString("user") })), pay)

	mux.Handle("POST /orders/{id}/pay", httplock.Idempotent(locker, rdb)(payHandler)) // net/http
}

func cronJobs(locker lock.Locker, cleanup func(context.Context) error) error {
	c := cron.New(cron.WithSeconds()) // the cron keeps its options: seconds, location, logger
	s := cronlock.New(c, locker)      // locker: the process's *lock.Client
	_, err := s.AddFunc("0 */5 * * * *", "cleanup", func(ctx context.Context) error {
		return cleanup(ctx) // ctx ends with a cause: lock.ErrLost, cronlock.ErrAtMostFor, cronlock.ErrStopped
	}, cronlock.AtMostFor(4*time.Minute))
	if err != nil {
		return err // cronlock.ErrInvalid: bad spec, duplicate name, AtLeastFor > AtMostFor, ...
	}
	s.Start()
	defer func() { <-s.Stop().Done() }() // 10 s grace for running jobs, then cancels them
	return nil
}

func gocronJobs(locker *lock.Client, cleanup func(context.Context) error) error {
	l, err := gocronlock.NewLocker(locker) // locker: the process's *lock.Client
	if err != nil {
		return err
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
	if err != nil {
		return err
	}
	l.DeriveHolds(s) // holds each run's marker half the job's interval: clocks may differ by less
	_, err = s.NewJob(gocron.DurationJob(time.Minute), l.Task(func(ctx context.Context) error {
		return cleanup(ctx) // ctx ends with cause lock.ErrLost if the run's lock is lost
	}), gocron.WithName("cleanup")) // every replica names the job alike
	if err != nil {
		return err
	}
	s.Start()
	defer s.Shutdown() // lets runs finish; before locker.Close
	return nil
}

func gocronGuide(locker *lock.Client, record func(gocronlock.Attempt), use func(gocron.Scheduler)) error {
	l, err := gocronlock.NewLocker(locker, gocronlock.WithOnAttempt(record)) // every attempt's outcome
	if err != nil {
		return err // lock.ErrInvalid: a nil Locker, a minimum hold below 20 ms, ...
	}
	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(l))
	if err != nil {
		return err
	}
	l.DeriveHolds(s) // minimum hold: half of each job's shortest gap between runs
	use(s)
	return nil
}

func leaders(ctx context.Context, locker *lock.Client, reconcile func(context.Context) error) error {
	err := leader.Run(ctx, locker, "reconciler", func(ctx context.Context) error {
		return reconcile(ctx) // ctx ends with cause lock.ErrLost if leadership is lost
	}) // campaigns until ctx ends; resigns when reconcile returns or ctx ends
	return err
}

func election(ctx context.Context, locker *lock.Client, reconcile func(context.Context) error) error {
	e, err := leader.New(locker, "reconciler", leader.WithLease(10*time.Second))
	if err != nil {
		return err // lock.ErrInvalid: empty name, bad back-off
	}
	go func() { _ = e.Run(ctx, reconcile) }() // reconcile(ctx) runs while this replica leads
	if tok, ok := e.Token(); ok {
		_ = tok // fence the leader's writes with it
	}
	return nil
}

func tracing(rdb *redis.Client) error {
	obs, err := otellock.New() // the global TracerProvider and MeterProvider
	if err != nil {
		return err
	}
	locker, err := lock.New(rdb, lock.WithObserver(obs))
	if err != nil {
		return err
	}
	defer locker.Close()
	return nil
}

func scale(addrs []string, node1, node2, node3 redis.UniversalClient) error {
	// Redis Cluster: the same lock.New; keys share a hash tag, wake-ups use sharded pub/sub.
	clustered, err := lock.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs}))
	if err != nil {
		return err
	}
	defer clustered.Close()

	// Quorum (Redlock) over independent masters: held when a majority agrees.
	quorum, err := lock.NewQuorum([]redis.UniversalClient{node1, node2, node3})
	if err != nil {
		return err
	}
	defer quorum.Close()
	return nil
}

// The "Testing your code" block of README.md, word for word: two tests of
// a user's charge, and that code.

func TestChargeStopsWhenTheLockIsLost(t *testing.T) {
	locker := locktest.New(t) // a *lock.Client on an embedded Redis, closed with the test
	ctx, unlock, err := locker.Lock(context.Background(), "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	locktest.Lose(t, locker, "orders:42") // as if the lease had ended in Redis
	if err := charge(ctx); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("charge after the loss: %v, want lock.ErrLost", err)
	}
}

func TestOneChargeUnderContention(t *testing.T) {
	locker := locktest.New(t)
	var charges atomic.Int32
	locktest.Contend(t, 10, func(int) error { // 10 goroutines, started together
		return chargeOnce(context.Background(), locker, "orders:42", &charges)
	})
	if n := charges.Load(); n != 1 {
		t.Fatalf("%d charges, want 1", n)
	}
}

// charge is the user's work under a lock: it stops when the lock context
// ended, with its cause.
func charge(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return nil
}

// chargeOnce charges an order under its lock unless it was charged.
func chargeOnce(ctx context.Context, locker lock.Locker, key string, charges *atomic.Int32) error {
	ctx, unlock, err := locker.Lock(ctx, key)
	if err != nil {
		return err
	}
	defer unlock()
	if charges.Load() > 0 {
		return nil
	}
	if err := charge(ctx); err != nil {
		return err
	}
	charges.Add(1)
	return nil
}
