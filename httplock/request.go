package httplock

import (
	"net/http"
	"strings"
)

// request is a net/http request as a key template reads it (see
// httpkit.Request).
type request struct {
	r      *http.Request
	values map[string]func(*http.Request) string // WithValue functions by name
}

func (q request) PathValue(name string) string { return q.r.PathValue(name) }
func (q request) Query(name string) string     { return q.r.URL.Query().Get(name) }
func (q request) Header(name string) string    { return q.r.Header.Get(name) }
func (q request) Value(name string) string     { return q.values[name](q.r) }

// Route returns the ServeMux pattern the request matched (r.Pattern, ""
// when no ServeMux routed it), and whether it has the wildcard name
// ("{name}" or "{name...}").
func (q request) Route(name string) (string, bool) {
	p := q.r.Pattern
	return p, strings.Contains(p, "{"+name+"}") || strings.Contains(p, "{"+name+"...}")
}
