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

// PathValue returns the path value name, r.PathValue(name); that of a
// rest wildcard "{name...}" with the slash before it ("/a/b", "/" for
// none), as gin gives its catch-all "*name", so that a route of either
// framework renders the same key.
func (q request) PathValue(name string) string {
	v := q.r.PathValue(name)
	if strings.Contains(q.r.Pattern, "{"+name+"...}") {
		return "/" + v
	}
	return v
}

func (q request) Query(name string) string  { return q.r.URL.Query().Get(name) }
func (q request) Header(name string) string { return q.r.Header.Get(name) }
func (q request) Value(name string) string  { return q.values[name](q.r) }

// Route returns the ServeMux pattern the request matched (r.Pattern, ""
// when no ServeMux routed it), and whether it has the wildcard name
// ("{name}" or "{name...}"). "{$}" anchors the end of a path and is no
// wildcard: a template naming "$" does not fit any route.
func (q request) Route(name string) (string, bool) {
	p := q.r.Pattern
	if name == "$" {
		return p, false
	}
	return p, strings.Contains(p, "{"+name+"}") || strings.Contains(p, "{"+name+"...}")
}
