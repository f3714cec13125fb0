package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockkit/lockkit/examples/internal/embedded"
	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// fleet is the replicas of the order service, the Redis they share and the
// spans they record.
type fleet struct {
	redisName string
	shop      *shop
	spans     *tracetest.SpanRecorder
	terms     *terms // of the replicas' leader election
	replicas  []*replica
	closers   []func()
}

// replica is one instance of the service, as one pod would run it.
type replica struct {
	locker      *lock.Client
	sched       scheduler
	srv         *http.Server
	addr        string
	stopLeading func() // ends its campaign (resigning if it leads) and waits for it
}

func startFleet(cfg config) (_ *fleet, err error) {
	f := &fleet{redisName: "embedded Redis", spans: tracetest.NewSpanRecorder(), terms: newTerms()}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	opt, stop, err := embedded.Redis(cfg.redisURL)
	if err != nil {
		return nil, err
	}
	f.closers = append(f.closers, stop)
	if cfg.redisURL != "" {
		f.redisName = "Redis at " + opt.Addr
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	f.closers = append(f.closers, func() { _ = tp.Shutdown(context.Background()) })
	obs, err := otellock.New(otellock.WithTracerProvider(tp))
	if err != nil {
		return nil, err
	}
	prefix, err := runPrefix()
	if err != nil {
		return nil, err
	}
	data := redis.NewClient(opt)
	f.closers = append(f.closers, func() { _ = data.Close() })
	if err := data.Ping(context.Background()).Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.redisName, err)
	}
	f.shop = newShop(data, prefix, cfg.payTime, tp.Tracer("lockkit-demo"))

	gin.SetMode(gin.ReleaseMode)
	for i := range cfg.replicas {
		r, err := f.startReplica(cfg, i, opt, prefix, obs, tp)
		if err != nil {
			return nil, err
		}
		f.replicas = append(f.replicas, r)
	}
	for i, r := range f.replicas {
		r.sched.start()
		f.campaign(i, r)
	}
	return f, nil
}

// runPrefix is a fresh key prefix, so runs against a real Redis never meet
// each other's keys.
func runPrefix() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "lockkit-demo-" + hex.EncodeToString(b[:]), nil
}

func (f *fleet) startReplica(cfg config, i int, opt *redis.Options, prefix string, obs *otellock.Observer, tp *sdktrace.TracerProvider) (*replica, error) {
	rdb := redis.NewClient(opt) // each replica its own pool, as in separate processes
	f.closers = append(f.closers, func() { _ = rdb.Close() })
	locker, err := lock.New(rdb, lock.WithPrefix(prefix), lock.WithObserver(obs),
		lock.WithOwnerLabel(fmt.Sprintf("replica-%d", i+1))) // who leads, in Redis
	if err != nil {
		return nil, err
	}
	r := &replica{locker: locker}
	f.closers = append(f.closers, func() { _ = locker.Close() })

	engine := gin.New()
	engine.Use(gin.Recovery(), otelgin.Middleware("orders", otelgin.WithTracerProvider(tp)))
	// A retried payment (same Idempotency-Key) gets the first one's
	// answer; another payment of the order waits for the order's lock.
	idempotent := ginlock.Idempotent(locker, rdb, httplock.WithKeyPrefix(prefix+":idempotency:"),
		httplock.WithOutcome(func(ctx context.Context, outcome string) {
			otellock.IdempotencyOutcome(ctx, outcome) // on the request's span
			f.shop.idempotencyOutcome(outcome)
		}))
	engine.POST("/orders/:id/pay", idempotent, ginlock.New(locker, "orders:{id}"), f.shop.pay)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = l.Addr().String()
	r.srv = &http.Server{Handler: engine, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := r.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("replica stopped", "addr", r.addr, "err", err)
		}
	}()
	f.closers = append(f.closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.srv.Shutdown(ctx)
	})

	r.sched, err = f.shop.newScheduler(cfg.cron, locker)
	if err != nil {
		return nil, err
	}
	f.closers = append(f.closers, r.sched.stop)
	return r, nil
}

// campaign has replica i run for the election's leader in the
// background, until stopLeading.
func (f *fleet) campaign(i int, r *replica) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = leader.Run(ctx, r.locker, election, f.terms.lead(i))
	}()
	r.stopLeading = func() {
		cancel()
		<-done
	}
	f.closers = append(f.closers, r.stopLeading)
}

func (f *fleet) urls() []string {
	var urls []string
	for _, r := range f.replicas {
		urls = append(urls, "http://"+r.addr)
	}
	return urls
}

func (f *fleet) listenAddrs() string {
	var a []string
	for _, r := range f.replicas {
		a = append(a, r.addr)
	}
	return strings.Join(a, ", ")
}

// stopCron stops every replica's scheduler and waits for running jobs.
func (f *fleet) stopCron() {
	for _, r := range f.replicas {
		r.sched.stop()
	}
}

// close stops everything startFleet started, in reverse order.
func (f *fleet) close() {
	for i := len(f.closers) - 1; i >= 0; i-- {
		f.closers[i]()
	}
}
