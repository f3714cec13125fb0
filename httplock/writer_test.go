package httplock_test

import (
	"bufio"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
)

// The handler gets the server's ResponseWriter as it is: it flushes
// (http.Flusher, http.ResponseController) and hijacks the connection, and
// the lock is held until the handler returns, whatever it did with the
// connection.
func TestFlushAndHijackHoldTheLock(t *testing.T) {
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
	// The client reads the end of the conversation when the handler
	// closes the connection, before the handler returns and the
	// middleware releases the key.
	locktest.Eventually(t, locktest.Bound(time.Second), "the key released after the hijacking handler returned", func() bool {
		return !locktest.Held(t, rdb, redisKey("s:1"))
	})
}

// A handler that aborts with http.ErrAbortHandler releases the lock; the
// server drops the connection without logging.
func TestAbortHandlerReleases(t *testing.T) {
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
