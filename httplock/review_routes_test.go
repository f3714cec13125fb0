package httplock_test

import (
	"net/http"
	"testing"

	"github.com/lockkit/lockkit/httplock"
)

// A template placeholder {$} names no wildcard: {$} in a ServeMux pattern
// only anchors the path's end. The route is misconfigured (500), not the
// request missing a value (400).
func TestReviewDollarIsNoWildcard(t *testing.T) {
	_, locker := newLocker(t)
	mux := route("GET /{$}", httplock.New(locker, "root:{$}"), ok)
	checkProblem(t, do(mux, http.MethodGet, "/"), http.StatusInternalServerError)
}

// The wildcard of {rest...} is named rest: a placeholder {param.rest...}
// names none, and the route is misconfigured (500).
func TestReviewDotsAreNoPartOfTheWildcardName(t *testing.T) {
	_, locker := newLocker(t)
	mux := route("GET /f/{rest...}", httplock.New(locker, "f:{param.rest...}"), ok)
	checkProblem(t, do(mux, http.MethodGet, "/f/a"), http.StatusInternalServerError)
}

// {name...} takes the rest of the path, with the slash before it as gin
// does, and escaped slashes in it are escaped again in the key; a HEAD
// request is routed to a GET pattern and takes the same key.
func TestReviewRestWildcardAndHead(t *testing.T) {
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
	checkProblem(t, do(mux, http.MethodGet, "/files/a/b/c%20d"), http.StatusConflict)
	close(leave)
	if code := <-answered; code != http.StatusOK {
		t.Fatalf("HEAD: status %d, want 200", code)
	}
}
