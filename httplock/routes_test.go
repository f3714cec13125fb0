package httplock_test

import (
	"net/http"
	"testing"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// A template placeholder {$} names no wildcard: {$} in a ServeMux pattern
// only anchors the path's end. The route is misconfigured (500), not the
// request missing a value (400).
func TestDollarIsNoWildcard(t *testing.T) {
	_, locker := newLocker(t)
	mux := route("GET /{$}", httplock.New(locker, "root:{$}"), ok)
	locktest.CheckProblem(t, do(mux, http.MethodGet, "/"), http.StatusInternalServerError)
}

// The wildcard of {rest...} is named rest: a placeholder {param.rest...}
// names none, and the route is misconfigured (500).
func TestDotsAreNoPartOfTheWildcardName(t *testing.T) {
	_, locker := newLocker(t)
	mux := route("GET /f/{rest...}", httplock.New(locker, "f:{param.rest...}"), ok)
	locktest.CheckProblem(t, do(mux, http.MethodGet, "/f/a"), http.StatusInternalServerError)
}

// {name...} takes the rest of the path, with the slash before it as gin
// does, and escaped slashes in it are escaped again in the key; a HEAD
// request is routed to a GET pattern and takes the same key.
func TestRestWildcardAndHead(t *testing.T) {
	_, locker := newLocker(t)
	entered, leave := make(chan string, 1), make(chan struct{})
	mux := route("GET /files/{path...}", httplock.New(locker, "files:{path}"), func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			entered <- httplock.Key(r)
			<-leave
		}
		ok(w, r)
	})
	answered := make(chan int)
	go func() { answered <- do(mux, http.MethodHead, "/files/a/b%2Fc%20d").Code }()
	if key := <-entered; key != "files:%2Fa%2Fb%2Fc%20d" {
		t.Errorf("key %q, want files:%%2Fa%%2Fb%%2Fc%%20d", key)
	}
	// The same path value, unescaped: the same key, held.
	locktest.CheckProblem(t, do(mux, http.MethodGet, "/files/a/b/c%20d"), http.StatusConflict)
	close(leave)
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("HEAD: status %d, want 200", code)
	}
}

// An escaped slash stays inside its path segment: {id} of "/o/a%2Fb" is
// "a/b", escaped in the key, and the request is not taken for "/o/a/b",
// which the route does not match.
func TestEscapedSlashInSegment(t *testing.T) {
	rec := &keyRecorder{}
	mux := route("GET /o/{id}", httplock.New(rec, "o:{id}"), ok)
	if w := do(mux, http.MethodGet, "/o/a%2Fb"); w.Code != http.StatusOK || len(rec.keys) != 1 || rec.keys[0] != "o:a%2Fb" {
		t.Fatalf("status %d, keys %q; want 200, [o:a%%2Fb]", w.Code, rec.keys)
	}
	if w := do(mux, http.MethodGet, "/o/a/b"); w.Code != http.StatusNotFound || len(rec.keys) != 1 {
		t.Fatalf("/o/a/b: status %d, keys %q; want 404 and no lock", w.Code, rec.keys)
	}
}

// A handler served without a ServeMux has no pattern: a path value is
// missing (400), other sources work; registered on a pattern without the
// wildcard, the route is misconfigured (500).
func TestHandlerWithoutPattern(t *testing.T) {
	rec := &keyRecorder{}
	locktest.CheckProblem(t, do(httplock.New(rec, "o:{id}")(http.HandlerFunc(ok)), http.MethodGet, "/o/1"), http.StatusBadRequest)
	if w := do(httplock.New(rec, "o:{query.id}")(http.HandlerFunc(ok)), http.MethodGet, "/o?id=1"); w.Code != http.StatusOK {
		t.Fatalf("query without a pattern: status %d, want 200", w.Code)
	}
	locktest.CheckProblem(t, do(route("/", httplock.New(rec, "o:{id}"), ok), http.MethodGet, "/o/1"), http.StatusInternalServerError)
	if len(rec.keys) != 1 || rec.keys[0] != "o:1" {
		t.Fatalf("keys %q, want [o:1]", rec.keys)
	}
}
