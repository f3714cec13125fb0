package otellock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// TestGinRequest: a route locked by ginlock under otelgin. The lock's spans
// are children of the request's server span, the handler's spans children
// of lock.hold, and a second request that finds the order locked shows a
// busy acquisition under its own request, not an error.
func TestGinRequest(t *testing.T) {
	gin.SetMode(gin.TestMode)
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)

	entered, proceed := make(chan struct{}), make(chan struct{})
	r := gin.New()
	r.Use(otelgin.Middleware("shop", otelgin.WithTracerProvider(tel.tp),
		otelgin.WithMeterProvider(metricnoop.NewMeterProvider())))
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		_, span := tel.tp.Tracer("test").Start(c.Request.Context(), "charge card")
		span.End()
		close(entered)
		<-proceed
		c.Status(http.StatusNoContent)
	})
	serve := func() int {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
		return w.Code
	}

	first := make(chan int)
	go func() { first <- serve() }()
	<-entered
	if code := serve(); code != http.StatusConflict {
		t.Errorf("second request: %d, want 409", code)
	}
	close(proceed)
	if code := <-first; code != http.StatusNoContent {
		t.Errorf("first request: %d, want 204", code)
	}

	var servers []sdktrace.ReadOnlySpan // the second request ends first
	for _, s := range tel.spans.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			servers = append(servers, s)
		}
	}
	if len(servers) != 2 {
		t.Fatalf("%d server spans, want 2", len(servers))
	}
	busy, paid := servers[0], servers[1]

	acquires := tel.ended("lock.acquire") // the first request's ends first
	if len(acquires) != 2 {
		t.Fatalf("%d lock.acquire spans, want 2", len(acquires))
	}
	childOf(t, acquires[0], paid.SpanContext())
	wantAttrs(t, acquires[0], aName.String("orders:{id}"), aAcquireOutcome.String("acquired")) // the template
	childOf(t, acquires[1], busy.SpanContext())
	wantAttrs(t, acquires[1], aName.String("orders:{id}"), aAcquireOutcome.String("busy"))
	if acquires[1].Status().Code == codes.Error {
		t.Errorf("busy acquisition has status %v", acquires[1].Status())
	}

	holdsEnded(t, tel, 1)
	hold := tel.only(t, "lock.hold")
	childOf(t, hold, paid.SpanContext())
	childOf(t, tel.only(t, "charge card"), hold.SpanContext())
	if !hold.EndTime().After(tel.only(t, "charge card").EndTime()) || hold.EndTime().After(paid.EndTime().Add(time.Second)) {
		t.Errorf("lock.hold ended at %v, want after the handler's work, at most its release after the request's end %v", hold.EndTime(), paid.EndTime())
	}
}

// holdsEnded waits until n lock.hold spans have ended: ginlock releases in
// the background as the chain returns, so a hold may end just after its
// request.
func holdsEnded(t *testing.T, tel *telemetry, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for len(tel.ended("lock.hold")) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d lock.hold spans ended after 2 s, want %d", len(tel.ended("lock.hold")), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGinLockName: ginlock names a route's lock after its key template,
// and a lock.WithName among its lock options names it otherwise.
func TestGinLockName(t *testing.T) {
	gin.SetMode(gin.TestMode)
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb)
	r := gin.New()
	ok := func(c *gin.Context) { c.Status(http.StatusNoContent) }
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), ok)
	r.POST("/orders/:id/ship", ginlock.New(locker, "ship:{id}", ginlock.WithLockOptions(lock.WithName("shipping"))), ok)
	for _, path := range []string{"/orders/42/pay", "/orders/42/ship"} {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		if w.Code != http.StatusNoContent {
			t.Fatalf("%s: %d", path, w.Code)
		}
	}
	holdsEnded(t, tel, 2)
	var names []string
	for _, s := range tel.ended("lock.hold") {
		names = append(names, attr(t, s, aName).AsString())
	}
	slices.Sort(names) // released in the background, in either order
	if len(names) != 2 || names[0] != "orders:{id}" || names[1] != "shipping" {
		t.Errorf("lock.hold names %q, want [orders:{id} shipping]", names)
	}
}

// A 409 is not an error: otelgin leaves the server span's status unset
// and records no exception, and the answer does not carry the key.
func TestConflictIsNotAnErrorInTraces(t *testing.T) {
	gin.SetMode(gin.TestMode)
	_, rdb := newMini(t)
	locker := locktest.NewClient(t, rdb)
	_, unlock, err := locker.Lock(context.Background(), "orders:alice%40example.com") // as escaped
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	tel := newTelemetry(t)
	r := gin.New()
	r.Use(otelgin.Middleware("shop", otelgin.WithTracerProvider(tel.tp),
		otelgin.WithMeterProvider(metricnoop.NewMeterProvider())))
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(*gin.Context) { t.Error("handler ran") })

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/alice@example.com/pay", nil))
	if w.Code != http.StatusConflict {
		t.Fatalf("status %d, want 409", w.Code)
	}
	server := tel.only(t, "POST /orders/:id/pay")
	if st := server.Status(); st.Code != codes.Unset {
		t.Errorf("server span status = %v %q, want Unset", st.Code, st.Description)
	}
	for _, ev := range server.Events() {
		t.Errorf("server span event %q, want none", ev.Name)
	}
	if strings.Contains(w.Body.String(), "alice") {
		t.Errorf("answer %s carries the key's value", w.Body)
	}
}
