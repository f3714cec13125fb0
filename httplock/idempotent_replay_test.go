package httplock

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
)

// wireAnswer is an answer as an HTTP client read it.
type wireAnswer struct {
	status  int
	header  http.Header
	body    []byte
	trailer http.Header
	early   []int // the 1xx statuses before it
}

// server serves h on every path and method under a middleware reporting
// to e, over HTTP.
func (e *idemEnv) server(t *testing.T, h http.HandlerFunc, opts ...IdempotencyOption) *httptest.Server {
	t.Helper()
	m, err := NewIdempotency(e.locker, e.rdb, append([]IdempotencyOption{WithOutcome(e.outcome)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(m.Handler(h))
	t.Cleanup(s.Close)
	return s
}

// send sends method /x with key and body to s, without asking for
// compression, and returns the answer as read.
func send(t *testing.T, s *httptest.Server, method, key, body string) wireAnswer {
	t.Helper()
	var a wireAnswer
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { a.early = append(a.early, code); return nil },
	})
	r, err := http.NewRequestWithContext(ctx, method, s.URL+"/x", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(IdempotencyKeyHeader, key)
	tr := &http.Transport{DisableCompression: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if a.body, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	a.status, a.header, a.trailer = resp.StatusCode, resp.Header, resp.Trailer
	return a
}

// TestIdempotentTrailers: trailers the handler declares and sets after
// the body reach the client of the first answer, as without the
// middleware.
func TestIdempotentTrailers(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(map[bool]string{false: "held back", true: "flushed"}[flush], func(t *testing.T) {
			e := newIdemEnv(t)
			s := e.server(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Trailer", "X-Sum")
				w.Header().Set("Content-Type", "text/plain")
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "body")
				w.Header().Set("X-Sum", "42")
				if flush { // the trailer was set before the answer streams
					_ = http.NewResponseController(w).Flush()
				}
				w.Header().Set(http.TrailerPrefix+"X-Late", "7")
			})
			a := send(t, s, http.MethodPost, "k", "")
			if a.status != http.StatusCreated || string(a.body) != "body" {
				t.Fatalf("answer %d %q", a.status, a.body)
			}
			if a.trailer.Get("X-Sum") != "42" || a.trailer.Get("X-Late") != "7" {
				t.Fatalf("trailers %v, want X-Sum: 42 and X-Late: 7", a.trailer)
			}
			e.checkOutcomes(t, map[bool]string{false: "ran", true: "not-stored"}[flush])
		})
	}
}

// TestIdempotentNoBodyStatuses: a handler writing a body with 204 or 304
// is told it may not, as net/http tells it, and no body is stored.
func TestIdempotentNoBodyStatuses(t *testing.T) {
	for _, status := range []int{http.StatusNoContent, http.StatusNotModified} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			e := newIdemEnv(t)
			var writeErr atomic.Value
			s := e.server(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				_, err := io.WriteString(w, "not allowed")
				writeErr.Store(struct{ error }{err})
			}, WithStoredStatus(func(int) bool { return true }))
			for i, want := range []string{"", "true"} {
				a := send(t, s, http.MethodPost, "k", "")
				if a.status != status || len(a.body) != 0 || a.header.Get(ReplayedHeader) != want {
					t.Fatalf("answer %d: %d %q replayed %q", i, a.status, a.body, a.header.Get(ReplayedHeader))
				}
			}
			if err, _ := writeErr.Load().(struct{ error }); !errors.Is(err.error, http.ErrBodyNotAllowed) {
				t.Fatalf("the handler's Write returned %v, want http.ErrBodyNotAllowed", err.error)
			}
			answer, _ := keys(DefaultKeyPrefix, http.MethodPost, "/x", "", "k")
			if b := e.srv.HGet(answer, "body"); b != "" {
				t.Fatalf("stored body %q for a %d", b, status)
			}
		})
	}
}

// TestIdempotentInvalidStatus: a status net/http refuses panics in the
// handler, as net/http's own writer does, and nothing is stored.
func TestIdempotentInvalidStatus(t *testing.T) {
	e := newIdemEnv(t)
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() == nil {
				t.Error("WriteHeader(42) did not panic")
			}
			w.WriteHeader(http.StatusCreated)
		}()
		w.WriteHeader(42)
	}, WithStoredStatus(func(int) bool { return true }))
	if w := serve(h, pay("1", "k", "")); w.Code != http.StatusCreated {
		t.Fatalf("answer %d, want 201", w.Code)
	}
	if w := serve(h, pay("1", "k", "")); w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" {
		t.Fatalf("retry %d %v, want the 201 replayed", w.Code, w.Header())
	}
}

// TestIdempotentReplayExact replays, over HTTP, answers whose exactness
// the recorder could lose: HEAD, gzip, no write at all, WriteHeader
// twice, 103 Early Hints, headers of many values, a binary body.
func TestIdempotentReplayExact(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(bytes.Repeat([]byte("paid "), 100))
	_ = zw.Close()
	for name, tc := range map[string]struct {
		method string
		h      http.HandlerFunc
		early  int
	}{
		"HEAD": {http.MethodHead, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, "hello")
		}, 0},
		"gzip": {http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(gz.Bytes())
		}, 0},
		"never writes": {http.MethodPost, func(http.ResponseWriter, *http.Request) {}, 0},
		"WriteHeader twice": {http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "accepted")
		}, 0},
		"103 Early Hints": {http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, "created")
		}, http.StatusEarlyHints},
		"many values, binary": {http.MethodPost, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Add("Content-Language", "en")
			w.Header().Add("Content-Language", "de")
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write([]byte{0, 0xff, '\r', '\n', 0x80})
		}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			e := newIdemEnv(t)
			var runs atomic.Int64
			s := e.server(t, func(w http.ResponseWriter, r *http.Request) { runs.Add(1); tc.h(w, r) },
				WithStoredHeaders("Content-Type", "Content-Encoding", "Content-Language", "Link"))
			first := send(t, s, tc.method, "k", "")
			if tc.early != 0 && (len(first.early) != 1 || first.early[0] != tc.early) {
				t.Fatalf("informational answers %v, want %d", first.early, tc.early)
			}
			again := send(t, s, tc.method, "k", "")
			if again.header.Get(ReplayedHeader) != "true" || runs.Load() != 1 {
				t.Fatalf("retry not replayed (%d runs): %d %v", runs.Load(), again.status, again.header)
			}
			if again.status != first.status || !bytes.Equal(again.body, first.body) {
				t.Fatalf("replay %d %q, want %d %q", again.status, again.body, first.status, first.body)
			}
			again.header.Del(ReplayedHeader)
			for _, h := range []http.Header{first.header, again.header} {
				h.Del("Date")
			}
			if !equalHeader(first.header, again.header) {
				t.Fatalf("replayed header %v, want %v", again.header, first.header)
			}
		})
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, vs := range a {
		if strings.Join(vs, "\x00") != strings.Join(b[k], "\x00") {
			return false
		}
	}
	return true
}

// TestIdempotentLateFailure: a handler that sets a 5xx status after its
// answer began (too late to send, as with net/http) failed: the answer
// is sent as it began but not stored.
func TestIdempotentLateFailure(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, "half")
		w.WriteHeader(http.StatusInternalServerError)
	})
	for range 2 {
		if w := serve(h, pay("1", "k", "")); w.Code != http.StatusOK || w.Body.String() != "half" || w.Header().Get(ReplayedHeader) != "" {
			t.Fatalf("answer %d %q %v, want 200 half, not replayed", w.Code, w.Body, w.Header())
		}
	}
	e.checkOutcomes(t, "not-stored", "not-stored")
	if runs.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2", runs.Load())
	}
}

// TestIdempotentHijackAfterHeader: a handler that writes its header and
// then hijacks the connection gets the header sent first, as net/http
// sends it, and the answer is not stored.
func TestIdempotentHijackAfterHeader(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	s := e.server(t, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("X-Stream", "raw")
		w.WriteHeader(http.StatusOK)
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("3\r\nabc\r\n0\r\n\r\n") // the chunked body the header announced
		_ = rw.Flush()
	})
	for range 2 {
		a := send(t, s, http.MethodPost, "k", "")
		if a.status != http.StatusOK || a.header.Get("X-Stream") != "raw" || string(a.body) != "abc" {
			t.Fatalf("answer %d %v %q, want 200 X-Stream: raw, abc", a.status, a.header, a.body)
		}
		// The client has its answer before the handler returns.
		locktest.Eventually(t, locktest.Bound(2*time.Second), "the handler's end", func() bool {
			e.mu.Lock()
			defer e.mu.Unlock()
			return len(e.outcomes) > 0
		})
		e.checkOutcomes(t, "not-stored")
		waitReleased(t)
	}
	if runs.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2", runs.Load())
	}
}
