package httplock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

func TestIdempotentReplaysByteForByte(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Add("Content-Language", "en")
		w.Header().Add("Content-Language", "de")
		w.Header().Set("Location", "/orders/1")
		w.Header().Set("X-Request-Id", "not stored")
		w.WriteHeader(http.StatusCreated)
		w.Header().Set("Location", "/set/too/late") // not sent, as with net/http
		_, _ = w.Write([]byte{0, 1, 2, 0xff, '\r', '\n'})
		_, _ = w.Write([]byte("tail"))
	})
	first := serve(h, pay("1", `"k1"`, "amount=5"))
	if first.Code != http.StatusCreated || first.Header().Get(ReplayedHeader) != "" || first.Header().Get("Location") != "/orders/1" {
		t.Fatalf("first answer: %d, %v", first.Code, first.Header())
	}
	e.checkOutcomes(t, "ran")
	for _, key := range []string{`"k1"`, "k1"} { // quoted and bare: the same key
		again := serve(h, pay("1", key, "amount=5"))
		if again.Code != first.Code || !bytes.Equal(again.Body.Bytes(), first.Body.Bytes()) {
			t.Fatalf("replay = %d %q, want %d %q", again.Code, again.Body, first.Code, first.Body)
		}
		for _, name := range []string{"Content-Type", "Location"} {
			if again.Header().Get(name) != first.Header().Get(name) {
				t.Fatalf("replayed %s = %q, want %q", name, again.Header().Get(name), first.Header().Get(name))
			}
		}
		if got := again.Header().Values("Content-Language"); strings.Join(got, ",") != "en,de" {
			t.Fatalf("replayed Content-Language = %q, want en, de", got)
		}
		if again.Header().Get("X-Request-Id") != "" {
			t.Fatal("a header outside the allow-list was replayed")
		}
		if again.Header().Get(ReplayedHeader) != "true" {
			t.Fatalf("%s = %q, want true", ReplayedHeader, again.Header().Get(ReplayedHeader))
		}
		e.checkOutcomes(t, "replayed")
	}
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

func TestIdempotentMismatch(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs))
	serve(h, pay("1", "k", "amount=5"))
	e.took()
	locktest.CheckProblem(t, serve(h, pay("1", "k", "amount=6")), http.StatusUnprocessableEntity) // other body
	locktest.CheckProblem(t, serve(h, pay("2", "k", "amount=5")), http.StatusUnprocessableEntity) // other path, same route
	other := pay("1", "k", "amount=5")
	other.URL.RawQuery, other.RequestURI = "currency=eur", "/orders/1/pay?currency=eur"
	locktest.CheckProblem(t, serve(h, other), http.StatusUnprocessableEntity) // other query
	e.checkOutcomes(t, "mismatch", "mismatch", "mismatch")
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

func TestIdempotentRequestBodyLimit(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithMaxRequestBody(10))
	locktest.CheckProblem(t, serve(h, pay("1", "k1", "01234567890")), http.StatusRequestEntityTooLarge)
	chunked := pay("1", "k2", "")
	chunked.Body, chunked.ContentLength = io.NopCloser(strings.NewReader("01234567890")), -1
	locktest.CheckProblem(t, serve(h, chunked), http.StatusRequestEntityTooLarge)
	e.checkOutcomes(t, "too-large", "too-large")
	if runs.Load() != 0 {
		t.Fatal("the handler ran on a body over the limit")
	}
	w := serve(h, pay("1", "k3", "0123456789"))
	if w.Code != http.StatusCreated || !strings.HasSuffix(w.Body.String(), "paid: 0123456789") {
		t.Fatalf("a body at the limit: %d %q, want 201 with the whole body echoed", w.Code, w.Body)
	}
}

func TestIdempotentStatusFilter(t *testing.T) {
	all := func(int) bool { return true }
	for _, tc := range []struct {
		status int
		opts   []IdempotencyOption
		stored bool
	}{
		{200, nil, true}, {201, nil, true}, {204, nil, true}, {400, nil, true}, {404, nil, true},
		{409, nil, false}, {429, nil, false}, {500, nil, false}, {503, nil, false},
		{409, []IdempotencyOption{WithStoredStatus(all)}, true},
		{500, []IdempotencyOption{WithStoredStatus(all)}, false},
		{201, []IdempotencyOption{WithStoredStatus(func(s int) bool { return s == 200 })}, false},
	} {
		t.Run(http.StatusText(tc.status), func(t *testing.T) {
			e := newIdemEnv(t)
			var runs atomic.Int64
			h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				w.WriteHeader(tc.status)
			}, tc.opts...)
			serve(h, pay("1", "k", ""))
			w := serve(h, pay("1", "k", ""))
			if w.Code != tc.status {
				t.Fatalf("second answer %d, want %d", w.Code, tc.status)
			}
			want := map[bool]int64{true: 1, false: 2}[tc.stored]
			if runs.Load() != want {
				t.Fatalf("stored = %v: the handler ran %d times, want %d", tc.stored, runs.Load(), want)
			}
		})
	}
}

func TestIdempotentStoredHeaders(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithStoredHeaders("x-run"))
	serve(h, pay("1", "k", ""))
	w := serve(h, pay("1", "k", ""))
	if w.Header().Get("X-Run") != "yes" || w.Header().Get("Location") != "" || w.Header().Get("Content-Type") != "" {
		t.Fatalf("replayed headers %v, want X-Run only (and the replay mark)", w.Header())
	}
}

func TestIdempotentLargeAnswerStreamed(t *testing.T) {
	for name, h := range map[string]http.HandlerFunc{
		"past the cap": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("01234"))
			_, _ = w.Write([]byte("56789"))
		},
		"flushed": func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("01234"))
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Error(err)
			}
			_, _ = w.Write([]byte("56789"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newIdemEnv(t)
			var runs atomic.Int64
			mux := e.mux(t, func(w http.ResponseWriter, r *http.Request) { runs.Add(1); h(w, r) }, WithMaxAnswerBody(8))
			for range 2 {
				if w := serve(mux, pay("1", "k", "")); w.Code != 200 || w.Body.String() != "0123456789" {
					t.Fatalf("answer %d %q, want 200 0123456789", w.Code, w.Body)
				}
			}
			e.checkOutcomes(t, "not-stored", "not-stored")
			if runs.Load() != 2 {
				t.Fatalf("the handler ran %d times, want 2: the answer was stored", runs.Load())
			}
		})
	}
}

func TestIdempotentRetention(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithRetention(time.Hour))
	answerKey, _ := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	for _, status := range []int{http.StatusCreated} {
		serve(h, pay("1", "k", ""))
		if ttl := e.srv.TTL(answerKey); ttl <= time.Hour-time.Minute || ttl > time.Hour {
			t.Fatalf("the answer's TTL = %v, want 1h (status %d)", ttl, status)
		}
	}
	e.srv.FastForward(time.Hour)
	if e.srv.Exists(answerKey) {
		t.Fatal("the answer outlived its retention")
	}
	serve(h, pay("1", "k", ""))
	if runs.Load() != 2 {
		t.Fatalf("after the retention the handler ran %d times in all, want 2", runs.Load())
	}
	for _, k := range e.srv.Keys() {
		if strings.HasPrefix(k, DefaultKeyPrefix) && e.srv.TTL(k) <= 0 {
			t.Fatalf("key %q has no TTL", k)
		}
	}
}

func TestIdempotentScope(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithScope(func(r *http.Request) string { return r.Header.Get("X-User") }))
	for _, user := range []string{"alice", "bob", "alice"} {
		r := pay("1", "k", "")
		r.Header.Set("X-User", user)
		serve(h, r)
	}
	e.checkOutcomes(t, "ran", "ran", "replayed")
	locktest.CheckProblem(t, serve(h, pay("1", "k", "")), http.StatusBadRequest)
	e.checkOutcomes(t, "missing-scope")
}

func TestIdempotentConflict(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithIdempotencyRetryAfter(3*time.Second))
	_, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	_, unlock, err := e.locker.TryLock(context.Background(), run, lock.WithLease(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w := serve(h, pay("1", "k", ""))
	locktest.CheckProblem(t, w, http.StatusConflict)
	if w.Header().Get("Retry-After") != "3" {
		t.Fatalf("Retry-After = %q, want 3", w.Header().Get("Retry-After"))
	}
	e.checkOutcomes(t, "conflict")
	_ = unlock()
	if w := serve(h, pay("1", "k", "")); w.Code != http.StatusCreated || runs.Load() != 1 {
		t.Fatalf("after the unlock: %d, %d runs", w.Code, runs.Load())
	}
}

func TestIdempotentPanicReleases(t *testing.T) {
	e := newIdemEnv(t)
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("half"))
		panic(http.ErrAbortHandler)
	})
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("recovered %v, want the handler's panic", p)
			}
		}()
		serve(h, pay("1", "k", ""))
	}()
	waitReleased(t)
	answer, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	if e.srv.Exists(answer) {
		t.Fatal("a panicking handler's answer was stored")
	}
	_, unlock, err := e.locker.TryLock(context.Background(), run)
	if err != nil {
		t.Fatalf("the run lock is still held after the panic: %v", err)
	}
	_ = unlock()
}

func TestNewIdempotencyInvalid(t *testing.T) {
	mr := newIdemEnv(t)
	var nilClient *lock.Client
	var nilRedis *redis.Client
	for name, call := range map[string]func() error{
		"nil locker":       func() error { _, err := NewIdempotency(nil, mr.rdb); return err },
		"typed nil locker": func() error { _, err := NewIdempotency(nilClient, mr.rdb); return err },
		"nil rdb":          func() error { _, err := NewIdempotency(mr.locker, nil); return err },
		"typed nil rdb":    func() error { _, err := NewIdempotency(mr.locker, nilRedis); return err },
		"retention":        func() error { _, err := NewIdempotency(mr.locker, mr.rdb, WithRetention(0)); return err },
		"answer cap":       func() error { _, err := NewIdempotency(mr.locker, mr.rdb, WithMaxAnswerBody(0)); return err },
		"body cap":         func() error { _, err := NewIdempotency(mr.locker, mr.rdb, WithMaxRequestBody(-1)); return err },
		"header":           func() error { _, err := NewIdempotency(mr.locker, mr.rdb, WithStoredHeaders("a b")); return err },
		"nil scope":        func() error { _, err := NewIdempotency(mr.locker, mr.rdb, WithScope(nil)); return err },
		"nil option":       func() error { _, err := NewIdempotency(mr.locker, mr.rdb, nil); return err },
		"lock option": func() error {
			_, err := NewIdempotency(mr.locker, mr.rdb, WithIdempotencyLockOptions(lock.WithLease(-1)))
			return err
		},
	} {
		err := call()
		if !errors.Is(err, lock.ErrInvalid) || !strings.HasPrefix(err.Error(), "httplock: NewIdempotency: ") {
			t.Errorf("%s: %v, want an httplock: NewIdempotency error wrapping lock.ErrInvalid", name, err)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Idempotent(nil, ...) did not panic")
		}
	}()
	Idempotent(nil, mr.rdb)
}

func TestIdempotentLostLeaseNotStored(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			e.srv.FastForward(time.Hour) // the lease lapses; the watchdog finds it lost
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
				t.Error("the lock context did not end when the lease was lost")
			}
			if cause := context.Cause(r.Context()); !errors.Is(cause, lock.ErrLost) {
				t.Errorf("the lock context ended with %v, want lock.ErrLost", cause)
			}
		}
		w.WriteHeader(http.StatusCreated)
	}, WithIdempotencyLockOptions(lock.WithLease(time.Second)))
	for range 2 {
		if w := serve(h, pay("1", "k", "")); w.Code != http.StatusCreated {
			t.Fatalf("answer %d, want the handler's 201", w.Code)
		}
	}
	e.checkOutcomes(t, "not-stored", "ran")
	if runs.Load() != 2 {
		t.Fatalf("the handler ran %d times, want 2: the answer of a lost run was stored", runs.Load())
	}
}

// beforeTryLock is a Locker that runs before ahead of every TryLock.
type beforeTryLock struct {
	lock.Locker
	before func()
}

func (b beforeTryLock) TryLock(ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc, error) {
	b.before()
	return b.Locker.TryLock(ctx, key, opts...)
}

func TestIdempotentReplayOnceLocked(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	first := e.mux(t, counted(&runs))
	// The first request runs from start to end between the retry's read
	// and its acquisition of the run lock.
	m, err := NewIdempotency(beforeTryLock{e.locker, func() { serve(first, pay("1", "k", "a")) }}, e.rdb, WithOutcome(e.outcome))
	if err != nil {
		t.Fatal(err)
	}
	retry := http.NewServeMux()
	retry.Handle(payRoute, m.Handler(counted(&runs)))
	w := serve(retry, pay("1", "k", "a"))
	if w.Code != http.StatusCreated || w.Header().Get(ReplayedHeader) != "true" || w.Body.String() != "run 1 paid: a" {
		t.Fatalf("the retry got %d %q %v, want the first answer replayed", w.Code, w.Body, w.Header())
	}
	e.checkOutcomes(t, "ran", "replayed")
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}
