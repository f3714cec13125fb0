package httplock_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// keyRecorder is a lock.Locker that grants every lock and records keys.
type keyRecorder struct{ keys []string }

func (k *keyRecorder) Lock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	return k.TryLock(ctx, key, opts...)
}

func (k *keyRecorder) TryLock(ctx context.Context, key string, _ ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	k.keys = append(k.keys, key)
	return ctx, func() error { return nil }, nil
}

type userKey struct{}

// Every source fills its placeholder with the request's escaped value,
// the same keys ginlock renders.
func TestTemplateSources(t *testing.T) {
	rec := &keyRecorder{}
	user := func(r *http.Request) string { s, _ := r.Context().Value(userKey{}).(string); return s }
	mw := httplock.New(rec, "t:{header.X-Tenant}:{query.year}:{value.user}:orders:{id}:{param.rest}",
		httplock.WithValue("user", user))
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/{rest...}", mw(http.HandlerFunc(ok)))
	r := httptest.NewRequest(http.MethodPost, "/orders/a:b/x/y?year=2026&year=1999", nil)
	r.Header.Set("X-Tenant", "acme corp")
	r = r.WithContext(context.WithValue(r.Context(), userKey{}, "ü"))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	want := "t:acme%20corp:2026:%C3%BC:orders:a%3Ab:%2Fx%2Fy" // ginlock's *rest is "/x/y"
	if w.Code != http.StatusOK || len(rec.keys) != 1 || rec.keys[0] != want {
		t.Fatalf("status %d, keys %q; want 200 and %q", w.Code, rec.keys, want)
	}
}

// A missing or empty value is answered 400 before any Redis call, and the
// failure handler gets an error matching ErrMissingValue naming it.
func TestMissingValue(t *testing.T) {
	for _, tt := range []struct {
		name, template, target string
		header                 string
		want                   string
	}{
		{"query", "r:{query.tenant}", "/r", "", `httplock: query parameter "tenant" is missing or empty`},
		{"empty query", "r:{query.tenant}", "/r?tenant=", "", `httplock: query parameter "tenant" is missing or empty`},
		{"header", "r:{header.X-Tenant}", "/r", "", `httplock: header "X-Tenant" is missing or empty`},
		{"value", "r:{value.user}", "/r", "", `httplock: value "user" is missing or empty`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &keyRecorder{}
			empty := httplock.WithValue("user", func(*http.Request) string { return "" })
			var opts []httplock.Option
			if strings.Contains(tt.template, "value.") {
				opts = append(opts, empty)
			}
			mux := route("GET /r", httplock.New(rec, tt.template, opts...), ok)
			w := do(mux, http.MethodGet, tt.target)
			p := locktest.CheckProblem(t, w, http.StatusBadRequest)
			if !strings.Contains(tt.want, p.Detail) || len(rec.keys) != 0 {
				t.Fatalf("detail %q, keys %q; want the value named, no lock taken", p.Detail, rec.keys)
			}
			var got error
			opts = append(opts, httplock.WithFailureHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
				got = err
				w.WriteHeader(http.StatusBadRequest)
			}))
			do(route("GET /r", httplock.New(rec, tt.template, opts...), ok), http.MethodGet, tt.target)
			if !errors.Is(got, httplock.ErrMissingValue) || got.Error() != tt.want {
				t.Fatalf("failure handler got %v, want ErrMissingValue %q", got, tt.want)
			}
		})
	}
}

// A template naming a path value the route's pattern lacks is the
// server's fault (500); a request no ServeMux routed has no path values.
func TestPathValueOfPattern(t *testing.T) {
	rec := &keyRecorder{}
	var got error
	mw := httplock.New(rec, "orders:{id}", httplock.WithFailureHandler(func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(http.StatusInternalServerError)
	}))
	do(route("POST /orders/{order}/pay", mw, ok), http.MethodPost, "/orders/42/pay")
	if got == nil || errors.Is(got, httplock.ErrMissingValue) ||
		got.Error() != `httplock: template "orders:{id}": route "POST /orders/{order}/pay" has no path parameter "id": the key template does not fit the route` {
		t.Fatalf("failure handler got %v, want the misconfigured route named", got)
	}
	locktest.CheckProblem(t, do(route("POST /orders/{order}/pay", httplock.New(rec, "orders:{id}"), ok),
		http.MethodPost, "/orders/42/pay"), http.StatusInternalServerError)

	direct := httplock.New(rec, "orders:{id}")(http.HandlerFunc(ok))
	locktest.CheckProblem(t, do(direct, http.MethodPost, "/orders/42/pay"), http.StatusBadRequest)
	if len(rec.keys) != 0 {
		t.Fatalf("keys %q taken, want none", rec.keys)
	}
}

// Invalid arguments make the constructors panic, naming the problem, and
// Validate report it.
func TestInvalidArguments(t *testing.T) {
	rec := &keyRecorder{}
	noop := func(http.ResponseWriter, *http.Request, error) {}
	for _, tt := range []struct {
		name string
		make func()
		want string
	}{
		{"bad template", func() { httplock.New(rec, "orders:{id") }, `httplock: template "orders:{id": '{' at byte 7 is not closed`},
		{"nil locker", func() { httplock.New(nil, "orders:{id}") }, `httplock: New(nil Locker, "orders:{id}")`},
		{"nil client", func() { httplock.New((*lock.Client)(nil), "orders:{id}") }, `httplock: New(nil Locker, "orders:{id}")`},
		{"nil option", func() { httplock.New(rec, "orders:{id}", nil) }, `httplock: template "orders:{id}": option 0 is nil`},
		{"wait", func() { httplock.New(rec, "o:{id}", httplock.WithWait(0)) }, `httplock: template "o:{id}": WithWait(0s): the wait must be positive`},
		{"timeout", func() { httplock.New(rec, "o:{id}", httplock.WithAcquireTimeout(-time.Second)) }, `httplock: template "o:{id}": WithAcquireTimeout(-1s): the timeout must be positive`},
		{"hint", func() { httplock.New(rec, "o:{id}", httplock.WithRetryAfter(0)) }, `httplock: template "o:{id}": WithRetryAfter(0s): the hint must be positive`},
		{"status", func() { httplock.New(rec, "o:{id}", httplock.WithConflictStatus(200)) }, `httplock: template "o:{id}": WithConflictStatus(200): want a known 4xx or 5xx status`},
		{"failure handler", func() { httplock.New(rec, "o:{id}", httplock.WithFailureHandler(nil)) }, `httplock: template "o:{id}": WithFailureHandler(nil)`},
		{"unused value", func() { httplock.New(rec, "o:{id}", httplock.WithValue("u", func(*http.Request) string { return "" })) }, `httplock: template "o:{id}": WithValue("u"): the template has no placeholder {value.u}`},
		{"value without function", func() { httplock.New(rec, "o:{value.u}") }, `httplock: template "o:{value.u}": placeholder {value.u} has no WithValue("u", ...)`},
		{"nil handler", func() { httplock.New(rec, "o:{id}", httplock.WithFailureHandler(noop))(nil) }, `httplock: template "o:{id}": nil handler`},
		{"limit", func() { httplock.Limit(&lock.Client{}, "r:{id}", 0) }, `httplock: Limit("r:{id}", 0): the limit must be at least 1`},
		{"nil limiter", func() { httplock.Limit(nil, "r:{id}", 2) }, `httplock: Limit(nil Limiter, "r:{id}")`},
		{"nil rlocker", func() { httplock.RLock(nil, "r:{id}") }, `httplock: RLock(nil RLocker, "r:{id}")`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				err, _ := recover().(error)
				if err == nil || err.Error() != tt.want {
					t.Fatalf("panic %v, want %q", err, tt.want)
				}
			}()
			tt.make()
		})
	}
	if err := httplock.Validate("orders:{id", httplock.WithWait(time.Second)); err == nil ||
		err.Error() != `httplock: template "orders:{id": '{' at byte 7 is not closed` {
		t.Fatalf("Validate = %v", err)
	}
	if err := httplock.Validate("t:{header.X-Tenant}:{query.year}:{id}", httplock.WithWait(time.Second)); err != nil {
		t.Fatalf("Validate of a valid template: %v", err)
	}
}
