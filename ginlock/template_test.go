package ginlock_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func user(c *gin.Context) string { return c.GetString("user") }

func TestValidateRejects(t *testing.T) {
	tests := []struct {
		key  string
		opts []ginlock.Option
		want string // in the error, after the quoted template
	}{
		{"", nil, "empty template"},
		{"orders:{id", nil, "'{' at byte 7 is not closed"},
		{"orders:{id:{x}", nil, "'{' at byte 7 is not closed"},
		{"orders:id}", nil, "'}' at byte 9 closes no placeholder"},
		{"orders:{}", nil, "empty placeholder {} at byte 7"},
		{"orders:{id}{x}", nil, "placeholder {id} at byte 7 must be set apart"},
		{"{a}-{b}", nil, "placeholder {a} at byte 0 must be set apart"},
		{"orders-{id}", nil, "placeholder {id} at byte 7 must be set apart"},
		{"orders:{id}x", nil, "placeholder {id} at byte 7 must be set apart"},
		{"orders%{id}", nil, "placeholder {id} at byte 7 must be set apart"},
		{"{cookie.sid}", nil, `unknown source "cookie"`},
		{"{query.}", nil, "placeholder {query.} at byte 0: no name"},
		{"{a b}", nil, "contains a space or control character"},
		{"{header.X Tenant}", nil, "contains a space or control character"},
		{"{header.X:Tenant}", nil, `"X:Tenant" is not a valid header name`},
		{"{value.user}", nil, `placeholder {value.user} has no WithValue("user", ...)`},
		{"{id}", []ginlock.Option{ginlock.WithValue("user", user)}, `WithValue("user"): the template has no placeholder {value.user}`},
		{"{value.user}", []ginlock.Option{ginlock.WithValue("user", nil)}, `WithValue("user"): nil function`},
		{"{value.user}", []ginlock.Option{ginlock.WithValue("user", user), ginlock.WithValue("user", user)}, "given twice"},
		{"{value.user}", []ginlock.Option{ginlock.WithValue("", user)}, `WithValue(""): no name`},
		{"{id}", []ginlock.Option{ginlock.WithWait(0)}, "WithWait(0s): the wait must be positive"},
		{"{id}", []ginlock.Option{ginlock.WithWait(-time.Second)}, "WithWait(-1s): the wait must be positive"},
		{"{id}", []ginlock.Option{ginlock.WithConflictStatus(http.StatusOK)}, "WithConflictStatus(200): want a known 4xx or 5xx status"},
		{"{id}", []ginlock.Option{ginlock.WithConflictStatus(499)}, "WithConflictStatus(499)"},
		{"{id}", []ginlock.Option{ginlock.WithFailureHandler(nil)}, "WithFailureHandler(nil)"},
		{"{id}", []ginlock.Option{nil}, "option 0 is nil"},
		{strings.Repeat("k", lock.MaxKeyLen+1), nil, "more than lock.MaxKeyLen"},
		{strings.Repeat("{a}:", 1000), nil, "its keys can be 67000 bytes long"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			err := ginlock.Validate(tt.key, tt.opts...)
			if err == nil {
				t.Fatalf("Validate(%.40q) = nil, want an error", tt.key)
			}
			prefix := fmt.Sprintf("ginlock: template %q: ", tt.key)
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate(%.40q) = %.300q, want %.60q followed by %q", tt.key, err, prefix, tt.want)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	for _, key := range []string{
		"orders:{id}",
		"reports:rebuild", // no placeholder: one lock for the route
		"{id}",
		"orders/{id}/items/{item}",
		"tenants:{header.X-Tenant}:reports:{query.year}",
		"files:{param.name.ext}",
		"ü{id}ü",
		"a:{id}:{id}",
		strings.Repeat("{a}:", 970),
	} {
		if err := ginlock.Validate(key); err != nil {
			t.Errorf("Validate(%.40q) = %v", key, err)
		}
	}
	if err := ginlock.Validate("reports:{value.user}", ginlock.WithValue("user", user)); err != nil {
		t.Errorf("Validate with WithValue = %v", err)
	}
}

func TestNewPanicsAtRegistration(t *testing.T) {
	tests := []struct {
		name   string
		locker lock.Locker
		key    string
		want   string
	}{
		{"bad template", &keyRecorder{}, "orders:{id", `ginlock: template "orders:{id": '{' at byte 7 is not closed`},
		{"nil locker", nil, "orders:{id}", `ginlock: New(nil Locker, "orders:{id}")`},
		{"nil client", (*lock.Client)(nil), "orders:{id}", `ginlock: New(nil Locker, "orders:{id}")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				err, ok := recover().(error)
				if !ok || err.Error() != tt.want {
					t.Fatalf("panic value %v, want error %q", err, tt.want)
				}
			}()
			ginlock.New(tt.locker, tt.key)
		})
	}
}

// keyOf runs the middleware for key on req (routed by route) and returns
// the lock key it asked for, or fails.
func keyOf(t *testing.T, key, route string, req *http.Request, opts ...ginlock.Option) string {
	t.Helper()
	rec := &keyRecorder{}
	r := gin.New()
	r.Use(func(c *gin.Context) { c.Set("user", "ada@example.com") })
	r.Handle(req.Method, route, ginlock.New(rec, key, opts...), func(c *gin.Context) { c.Status(http.StatusOK) })
	if w := do(r, req); w.Code != http.StatusOK || len(rec.keys) != 1 {
		t.Fatalf("%s %s: status %d, keys %q", req.Method, req.URL, w.Code, rec.keys)
	}
	return rec.keys[0]
}

func TestKeys(t *testing.T) {
	long := strings.Repeat("x", 65)
	sum := sha256.Sum256([]byte(long))
	tests := []struct {
		name, key, route, target string
		header                   http.Header
		want                     string
	}{
		{"path", "orders:{id}", "/orders/:id/pay", "/orders/42/pay", nil, "orders:42"},
		{"param prefix", "orders:{param.id}", "/orders/:id", "/orders/42", nil, "orders:42"},
		{"literal only", "reports", "/r", "/r", nil, "reports"},
		{"query", "reports:{query.year}", "/r", "/r?year=2025&year=1999", nil, "reports:2025"},
		{"header", "t:{header.X-Tenant}", "/r", "/r", http.Header{"X-Tenant": {"acme"}}, "t:acme"},
		{"header case", "t:{header.x-tenant}", "/r", "/r", http.Header{"X-Tenant": {"acme"}}, "t:acme"},
		{"several", "t:{header.X-Tenant}/{id}/{query.v}", "/o/:id", "/o/7?v=2", http.Header{"X-Tenant": {"acme"}}, "t:acme/7/2"},
		{"colon escaped", "orders:{id}", "/orders/:id", "/orders/1:other", nil, "orders:1%3Aother"},
		{"percent escaped", "orders:{id}", "/orders/:id", "/orders/1%253A", nil, "orders:1%253A"},
		{"braces escaped", "q:{query.q}", "/r", "/r?q=%7Bid%7D", nil, "q:%7Bid%7D"},
		{"unreserved kept", "q:{query.q}", "/r", "/r?q=a-b.c_d~9Z", nil, "q:a-b.c_d~9Z"},
		{"unicode", "q:{query.q}", "/r", "/r?q=%C3%BC", nil, "q:%C3%BC"},
		{"catch-all", "files:{path}", "/files/*path", "/files/a/b", nil, "files:%2Fa%2Fb"},
		{"long hashed", "q:{query.q}", "/r", "/r?q=" + long, nil, "q:%h" + hex.EncodeToString(sum[:])},
		{"64 kept", "q:{query.q}", "/r", "/r?q=" + long[:64], nil, "q:" + long[:64]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.target, nil)
			for k, v := range tt.header {
				req.Header[k] = v
			}
			if got := keyOf(t, tt.key, tt.route, req); got != tt.want {
				t.Fatalf("key = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestWithValue(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, "/reports", nil)
	got := keyOf(t, "reports:{value.user}", "/reports", req, ginlock.WithValue("user", user))
	if want := "reports:ada%40example.com"; got != want {
		t.Fatalf("key = %q, want %q", got, want)
	}
}

// TestMissingValue checks that a request lacking a value gets 400 with a
// problem body naming it, and that no Redis command is sent.
func TestMissingValue(t *testing.T) {
	tests := []struct {
		name, key, route, target string
		want                     string
	}{
		{"query", "r:{query.year}", "/r", "/r", `query parameter "year" is missing or empty`},
		{"empty query", "r:{query.year}", "/r", "/r?year=", `query parameter "year" is missing or empty`},
		{"header", "r:{header.X-Tenant}", "/r", "/r", `header "X-Tenant" is missing or empty`},
		{"value", "r:{value.none}", "/r", "/r", `value "none" is missing or empty`},
		{"second of two", "r:{id}:{query.v}", "/r/:id", "/r/1", `query parameter "v" is missing or empty`},
	}
	_, rdb := locktest.NewRedis(t)
	locker := locktest.NewClient(t, rdb)
	cc := locktest.CountCommands(rdb)
	none := func(*gin.Context) string { return "" }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []ginlock.Option
			if strings.Contains(tt.key, "value.") {
				opts = append(opts, ginlock.WithValue("none", none))
			}
			var errs []error
			ran := false
			r := gin.New()
			r.Use(errorsOf(&errs))
			r.POST(tt.route, ginlock.New(locker, tt.key, opts...), func(*gin.Context) { ran = true })
			w := post(r, tt.target)
			p := locktest.CheckProblem(t, w, http.StatusBadRequest)
			if p.Detail != tt.want {
				t.Errorf("detail = %q, want %q", p.Detail, tt.want)
			}
			if ran {
				t.Error("handler ran")
			}
			if len(errs) != 1 || !errors.Is(errs[0], ginlock.ErrMissingValue) || errs[0].Error() != "ginlock: "+tt.want {
				t.Errorf("c.Errors = %v, want one ErrMissingValue %q", errs, "ginlock: "+tt.want)
			}
		})
	}
	if n := cc.N(); n != 0 {
		t.Fatalf("%d Redis commands sent, want 0", n)
	}
}

// A template that does not fit its route, or lock options every request
// would fail with, are server faults: caught at registration where they
// can be, answered 500 (never 400) where they cannot.
func TestMisconfigurationIsNotTheClientsFault(t *testing.T) {
	if err := ginlock.Validate("orders:{id}", ginlock.WithLockOptions(lock.WithLease(5*time.Millisecond))); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("Validate with a 5 ms lease = %v, want ErrInvalid", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("New with a 5 ms lease did not panic")
			}
		}()
		ginlock.New(&keyRecorder{}, "orders:{id}", ginlock.WithLockOptions(lock.WithLease(5*time.Millisecond)))
	}()

	var errs []error
	locker := &keyRecorder{}
	r := gin.New()
	r.Use(errorsOf(&errs))
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{order_id}"), func(*gin.Context) { t.Error("handler ran") })
	w := post(r, "/orders/42/pay")
	locktest.CheckProblem(t, w, http.StatusInternalServerError)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "order_id") || !strings.Contains(errs[0].Error(), "/orders/:id/pay") {
		t.Errorf("c.Errors = %v, want one naming the parameter and the route", errs)
	}
	if len(locker.keys) != 0 {
		t.Errorf("locked %v", locker.keys)
	}
}
