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

// FuzzSameKeysAsHTTPLock checks that ginlock and httplock render the same
// key for the same request: path parameter, query, header and named
// value, whatever their bytes.
func FuzzSameKeysAsHTTPLock(f *testing.F) {
	for _, s := range [][4]string{
		{"42", "acme", "2026", "u1"},
		{"a:b", "a b", "ü", "%h"},
		{"~._-", "x/y?z", "\xff\x00", strings.Repeat("long", 20)},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	const tmpl = "t:{header.X-Tenant}:{query.year}:{value.user}:orders:{id}"
	user := func(r *http.Request) string { return r.Header.Get("X-User") }
	gr, hr := &keyRecorder{}, &keyRecorder{}
	g := gin.New()
	g.POST("/orders/:id", ginlock.New(gr, tmpl, ginlock.WithValue("user", func(c *gin.Context) string { return user(c.Request) })),
		func(c *gin.Context) { c.Status(http.StatusOK) })
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}", httplock.New(hr, tmpl, httplock.WithValue("user", user))(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	f.Fuzz(func(t *testing.T, id, tenant, year, u string) {
		if id == "" || id == "." || id == ".." || strings.ContainsAny(id, "/?#%") || strings.ContainsAny(tenant+u, "\r\n\x00") {
			return // a path segment both routers match (ServeMux cleans dots); header values as HTTP carries them
		}
		gr.keys, hr.keys = nil, nil
		for _, h := range []http.Handler{g, mux} {
			r := httptest.NewRequest(http.MethodPost, "/orders/x?"+url.Values{"year": {year}}.Encode(), nil)
			r.URL.Path, r.URL.RawPath = "/orders/"+id, ""
			r.Header.Set("X-Tenant", tenant)
			r.Header.Set("X-User", u)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		want := 0 // keys taken: none when a value is missing (400)
		if tenant != "" && year != "" && u != "" {
			want = 1
		}
		if len(gr.keys) != want || len(hr.keys) != want || want == 1 && gr.keys[0] != hr.keys[0] {
			t.Fatalf("ginlock keys %q, httplock keys %q; want %d, equal", gr.keys, hr.keys, want)
		}
	})
}
