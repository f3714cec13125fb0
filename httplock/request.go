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
	if _, rest := wildcard(q.r.Pattern, name); rest {
		return "/" + v
	}
	return v
}

func (q request) Query(name string) string  { return q.r.URL.Query().Get(name) }
func (q request) Header(name string) string { return q.r.Header.Get(name) }
func (q request) Value(name string) string  { return q.values[name](q.r) }

// Route returns the ServeMux pattern the request matched (r.Pattern, ""
// when no ServeMux routed it), and whether it has the wildcard name.
func (q request) Route(name string) (string, bool) {
	declared, _ := wildcard(q.r.Pattern, name)
	return q.r.Pattern, declared
}

// wildcard reports whether the ServeMux pattern has the wildcard name,
// "{name}" or "{name...}", and whether it is the latter, which takes the
// rest of the path. "{$}" only anchors the path's end: it is no wildcard.
func wildcard(pattern, name string) (declared, rest bool) {
	for {
		_, after, ok := strings.Cut(pattern, "{")
		if !ok {
			return false, false
		}
		w, after, ok := strings.Cut(after, "}")
		if !ok {
			return false, false
		}
		pattern = after
		base, dots := strings.CutSuffix(w, "...")
		if base == name && w != "$" {
			return true, dots
		}
	}
}
