package main

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/lock"
)

// shop is the order service every replica runs, and the record of what
// happened that the report checks. Orders live in Redis; the record is in
// memory, shared by the replicas because they run in one process here.
type shop struct {
	rdb     *redis.Client
	prefix  string // of this run's order keys
	payTime time.Duration
	tracer  trace.Tracer

	mu        sync.Mutex
	paying    map[string]int // payments of an order in progress now
	maxPaying int            // the most payments of one order at once
	payments  map[string]int
	keyRuns   map[string]int    // handler runs per Idempotency-Key
	idem      map[string]int    // Idempotency-Key outcomes, on all replicas
	runs      map[time.Time]int // cron runs per tick
	attempts  map[string]int    // cron attempts per outcome, on all replicas
}

func newShop(rdb *redis.Client, prefix string, payTime time.Duration, tracer trace.Tracer) *shop {
	return &shop{
		rdb: rdb, prefix: prefix, payTime: payTime, tracer: tracer,
		paying: map[string]int{}, payments: map[string]int{}, keyRuns: map[string]int{},
		idem: map[string]int{},
		runs: map[time.Time]int{}, attempts: map[string]int{},
	}
}

// slowPays is how often a payment takes slowFactor times payTime: the
// provider is slow now and then, longer than a client waits for its first
// answer (see firstWait).
const (
	slowPays   = 4 // one payment in slowPays
	slowFactor = 20
)

// pay is the handler of POST /orders/:id/pay, run under ginlock.Idempotent
// (a retry with the payment's Idempotency-Key gets the first answer) and
// ginlock's lock on "orders:{id}" (another payment of the order waits its
// turn). Its check-then-pay would pay twice without the lock.
func (s *shop) pay(c *gin.Context) {
	ctx, span := s.tracer.Start(c.Request.Context(), "pay")
	defer span.End()
	id := c.Param("id")
	defer s.enter(id, c.GetHeader("Idempotency-Key"))()

	// The payment goes on when the client stops waiting (its retry gets
	// this answer); it stops only if the lock is lost.
	wctx := context.WithoutCancel(ctx)
	paid := s.prefix + ":paid:" + id
	n, err := s.rdb.Exists(wctx, paid).Result()
	if err != nil {
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	if n == 1 {
		c.JSON(http.StatusOK, gin.H{"order": id, "status": "already paid"})
		return
	}
	took := s.payTime
	if rand.IntN(slowPays) == 0 {
		took *= slowFactor
	}
	t := time.NewTimer(took) // the call to the payment provider
	defer t.Stop()
	for waiting := true; waiting; {
		select {
		case <-t.C:
			waiting = false
		case <-ctx.Done():
			if errors.Is(context.Cause(ctx), lock.ErrLost) {
				c.AbortWithStatus(http.StatusServiceUnavailable)
				return
			}
			ctx = wctx // the client left: finish for its retry
		}
	}
	if !lock.Held(c.Request.Context(), "orders:"+id) { // lost after the client left
		c.AbortWithStatus(http.StatusServiceUnavailable)
		return
	}
	token, _ := lock.FencingToken(wctx, "orders:"+id)
	if err := s.rdb.Set(wctx, paid, token, 0).Err(); err != nil {
		c.AbortWithStatus(http.StatusInternalServerError)
		return
	}
	s.mu.Lock()
	s.payments[id]++
	s.mu.Unlock()
	c.JSON(http.StatusOK, gin.H{"order": id, "status": "paid", "fencing_token": token})
}

// enter records a payment of id with Idempotency-Key key in progress
// until the returned function is called.
func (s *shop) enter(id, key string) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keyRuns[key]++
	s.paying[id]++
	s.maxPaying = max(s.maxPaying, s.paying[id])
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.paying[id]--
	}
}

// settle is the cron job: it records which tick it ran for.
func (s *shop) settle(ctx context.Context, tick time.Time) error {
	s.mu.Lock()
	s.runs[tick]++
	s.mu.Unlock()
	return s.rdb.Set(ctx, s.prefix+":settled", strconv.FormatInt(tick.Unix(), 10), 0).Err()
}

// attempt records the outcome of a replica's cron attempt.
func (s *shop) attempt(outcome string) {
	s.mu.Lock()
	s.attempts[outcome]++
	s.mu.Unlock()
}

// idempotencyOutcome records how ginlock.Idempotent served a request.
func (s *shop) idempotencyOutcome(outcome string) {
	s.mu.Lock()
	s.idem[outcome]++
	s.mu.Unlock()
}
