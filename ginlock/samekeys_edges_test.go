package ginlock_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/httplock"
)

// Requests as clients send them, percent-encoded on the wire, give gin and
// net/http the same key for awkward values: unicode, '%', spaces, a value
// that reads as a digest, values long enough to be hashed.
func TestSameKeysOnTheWire(t *testing.T) {
	const tmpl = "t:{header.X-Tenant}:{query.q}:{id}"
	gr, hr := &keyRecorder{}, &keyRecorder{}
	g := gin.New()
	g.GET("/o/:id", ginlock.New(gr, tmpl), func(c *gin.Context) { c.Status(http.StatusOK) })
	mux := http.NewServeMux()
	mux.Handle("GET /o/{id}", httplock.New(hr, tmpl)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	long := strings.Repeat("ü", 40)
	for _, v := range []string{"ü", "100%", "a%25b", "a b+c", "%h00", long, strings.Repeat("x", 65), "日本:語"} {
		gr.keys, hr.keys = nil, nil
		target := "/o/" + url.PathEscape(v) + "?q=" + url.QueryEscape(v)
		for _, h := range []http.Handler{g, mux} {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			r.Header.Set("X-Tenant", v)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != http.StatusOK {
				t.Fatalf("%q: status %d from %T", v, w.Code, h)
			}
		}
		if len(gr.keys) != 1 || len(hr.keys) != 1 || gr.keys[0] != hr.keys[0] {
			t.Fatalf("%q: ginlock keys %q, httplock keys %q; want one, equal", v, gr.keys, hr.keys)
		}
		if len(v)*3 > 64 && !strings.Contains(gr.keys[0], "%h") {
			t.Errorf("%q: key %q, want the long value hashed", v, gr.keys[0])
		}
	}
}

// A catch-all, gin's *path and ServeMux's {path...}, gives both the same
// key, also for the bare prefix, where gin's value is "/": replicas of
// either framework sharing a Redis exclude each other.
func TestSameKeysOfCatchAll(t *testing.T) {
	const tmpl = "files:{path}"
	gr, hr := &keyRecorder{}, &keyRecorder{}
	g := gin.New()
	g.GET("/files/*path", ginlock.New(gr, tmpl), func(c *gin.Context) { c.Status(http.StatusOK) })
	mux := http.NewServeMux()
	mux.Handle("GET /files/{path...}", httplock.New(hr, tmpl)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	for _, target := range []string{"/files/a/b", "/files/a%20b/c", "/files/ü", "/files/"} {
		gr.keys, hr.keys = nil, nil
		for _, h := range []http.Handler{g, mux} {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
			if w.Code != http.StatusOK {
				t.Errorf("%s: status %d from %T", target, w.Code, h)
			}
		}
		if len(gr.keys) != 1 || len(hr.keys) != 1 || gr.keys[0] != hr.keys[0] {
			t.Errorf("%s: ginlock keys %q, httplock keys %q; want one, equal", target, gr.keys, hr.keys)
		}
	}
}
