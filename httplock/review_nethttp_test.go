package httplock_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
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
// request is routed to a GET pattern
// and takes the same key.
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

// The handler gets the server's ResponseWriter as it is: it flushes
// (http.Flusher, http.ResponseController) and hijacks the connection, and
// the lock is held until the handler returns, whatever it did with the
// connection.
func TestReviewFlushAndHijackHoldTheLock(t *testing.T) {
	rdb, locker := newLocker(t)
	hijacked := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("GET /stream/{id}", httplock.New(locker, "s:{id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "one\n")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "two\n")
		if err := http.NewResponseController(w).Flush(); err != nil {
			t.Errorf("ResponseController.Flush: %v", err)
		}
	})))
	mux.Handle("GET /ws/{id}", httplock.New(locker, "s:{id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		close(hijacked)
		_, _ = buf.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
		_ = buf.Flush()
		line, _ := buf.ReadString('\n') // the client's message, then the handler returns
		_, _ = conn.Write([]byte("echo " + line))
	})))
	hs := httptest.NewServer(mux)
	defer hs.Close()

	resp, err := hs.Client().Get(hs.URL + "/stream/1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "one\ntwo\n" {
		t.Fatalf("streamed %q", body)
	}

	conn, err := net.Dial("tcp", hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET /ws/1 HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: x\r\n\r\n")
	<-hijacked
	if !locktest.Held(t, rdb, redisKey("s:1")) {
		t.Fatal("key not held while the hijacked connection is served")
	}
	resp, err = hs.Client().Get(hs.URL + "/stream/1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("while hijacked: status %d, want 409", resp.StatusCode)
	}
	_, _ = io.WriteString(conn, "hi\n")
	r := bufio.NewReader(conn)
	var lines []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, line)
	}
	if got := strings.Join(lines, ""); !strings.HasSuffix(got, "echo hi\n") {
		t.Fatalf("hijacked conversation %q", got)
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("s:1")) {
		t.Fatal("key held after the hijacking handler returned")
	}
}

// A handler that aborts with http.ErrAbortHandler releases the lock; the
// server drops the connection without logging.
func TestReviewAbortHandlerReleases(t *testing.T) {
	rdb, locker := newLocker(t)
	mux := route("POST /o/{id}", httplock.New(locker, "o:{id}"), func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "partial")
		panic(http.ErrAbortHandler)
	})
	var logged locktest.SyncBuffer
	hs := httptest.NewUnstartedServer(mux)
	hs.Config.ErrorLog = log.New(&logged, "", 0)
	hs.Start()
	defer hs.Close()
	if resp, err := hs.Client().Post(hs.URL+"/o/1", "", nil); err == nil {
		resp.Body.Close()
		t.Fatalf("status %d, want the connection dropped", resp.StatusCode)
	}
	released(t)
	if locktest.Held(t, rdb, redisKey("o:1")) {
		t.Fatal("key held after the handler aborted")
	}
	if s := logged.String(); s != "" {
		t.Fatalf("server logged %q", s)
	}
}

// Behind http.TimeoutHandler, the middleware inside it holds the lock
// while the handler runs after the timeout answered: a second request
// meanwhile is turned away, and runs of one key never overlap.
func TestReviewInsideTimeoutHandlerHoldsPastTimeout(t *testing.T) {
	rdb, locker := newLocker(t)
	var running, overlaps atomic.Int32
	finished := make(chan struct{}, 2)
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { finished <- struct{}{} }()
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		<-r.Context().Done() // the timeout: the handler goes on, detached
		time.Sleep(200 * time.Millisecond)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /o/{id}", http.TimeoutHandler(httplock.New(locker, "o:{id}")(pay), 50*time.Millisecond, "timeout"))
	if w := do(mux, http.MethodPost, "/o/1"); w.Code != http.StatusServiceUnavailable || w.Body.String() != "timeout" {
		t.Fatalf("first: %d %q, want the timeout's 503", w.Code, w.Body)
	}
	checkProblem(t, do(mux, http.MethodPost, "/o/1"), http.StatusConflict)
	<-finished
	released(t)
	if locktest.Held(t, rdb, redisKey("o:1")) || overlaps.Load() != 0 {
		t.Fatalf("after the handler: held %v, overlaps %d; want free, 0", locktest.Held(t, rdb, redisKey("o:1")), overlaps.Load())
	}
}

// Two middlewares of different keys, nested: the handler holds both, Key
// is the inner one's, and both are free after it.
func TestReviewNestedDifferentKeys(t *testing.T) {
	rdb, locker := newLocker(t)
	var key string
	var both bool
	h := httplock.New(locker, "tenant:{header.X-T}")(httplock.New(locker, "order:{id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key = httplock.Key(r)
		both = lock.Held(r.Context(), "tenant:acme") && lock.Held(r.Context(), "order:1")
	})))
	mux := http.NewServeMux()
	mux.Handle("POST /o/{id}", h)
	r := httptest.NewRequest(http.MethodPost, "/o/1", nil)
	r.Header.Set("X-T", "acme")
	mux.ServeHTTP(httptest.NewRecorder(), r)
	released(t)
	if key != "order:1" || !both {
		t.Fatalf("Key %q, both held %v; want order:1, true", key, both)
	}
	if locktest.Held(t, rdb, redisKey("tenant:acme")) || locktest.Held(t, rdb, redisKey("order:1")) {
		t.Fatal("a key held after the handler")
	}
}

// An outer middleware's r.WithContext reaches the handler: its values and
// its cancellation (the handler's context ends when it does).
func TestReviewOuterWithContext(t *testing.T) {
	_, locker := newLocker(t)
	type ctxKey struct{}
	var value any
	var cause error
	inner := httplock.New(locker, "o:{id}")(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		value = r.Context().Value(ctxKey{})
		<-r.Context().Done()
		cause = context.Cause(r.Context())
	}))
	errOuter := errors.New("outer middleware gave up")
	mux := http.NewServeMux()
	mux.Handle("POST /o/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), ctxKey{}, "v"))
		time.AfterFunc(50*time.Millisecond, func() { cancel(errOuter) })
		inner.ServeHTTP(w, r.WithContext(ctx))
	}))
	do(mux, http.MethodPost, "/o/1")
	if value != "v" || !errors.Is(cause, errOuter) {
		t.Fatalf("value %v, cause %v; want v, the outer cause", value, cause)
	}
}

// Closing the lock Client while handlers run ends each handler's context
// with cause lock.ErrClosed; each is answered as it returns, and no
// release is left running.
func TestReviewCloseWhileHandlersRun(t *testing.T) {
	_, locker := newLocker(t)
	const n = 3
	entered := make(chan struct{}, n)
	causes := make(chan error, n)
	mux := route("POST /o/{id}", httplock.New(locker, "o:{id}"), func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		if locktest.ClosedWithin(r.Context().Done(), locktest.Bound(2*time.Second)) {
			causes <- context.Cause(r.Context())
		} else {
			causes <- errors.New("handler's context not ended")
		}
		ok(w, r)
	})
	answered := make(chan int, n)
	for i := range n {
		go func() { answered <- do(mux, http.MethodPost, "/o/"+string(rune('1'+i))).Code }()
	}
	for range n {
		<-entered
	}
	if err := locker.Close(); err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-causes; !errors.Is(err, lock.ErrClosed) {
			t.Errorf("cause %v, want lock.ErrClosed", err)
		}
		if code := <-answered; code != http.StatusOK {
			t.Errorf("status %d, want the handler's 200", code)
		}
	}
	released(t)
}
