package httplock

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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
		_, _ = w.Write([]byte{0, 1, 2, 0xff, '\r', '\n'})
		_, _ = w.Write([]byte("tail"))
	})
	first := serve(h, pay("1", `"k1"`, "amount=5"))
	if first.Code != http.StatusCreated || first.Header().Get(ReplayedHeader) != "" {
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
	checkProblem(t, serve(h, pay("1", "k", "amount=6")), http.StatusUnprocessableEntity) // other body
	checkProblem(t, serve(h, pay("2", "k", "amount=5")), http.StatusUnprocessableEntity) // other path, same route
	e.checkOutcomes(t, "mismatch", "mismatch")
	if runs.Load() != 1 {
		t.Fatalf("the handler ran %d times, want 1", runs.Load())
	}
}

func TestIdempotentKeyHeader(t *testing.T) {
	long := strings.Repeat("k", 255)
	for _, tc := range []struct {
		name    string
		values  []string
		status  int
		outcome string
	}{
		{"quoted", []string{`"a-1"`}, http.StatusCreated, "ran"},
		{"bare", []string{"a-1"}, http.StatusCreated, "ran"},
		{"escapes", []string{`"a\"b\\c"`}, http.StatusCreated, "ran"},
		{"255 bytes", []string{long}, http.StatusCreated, "ran"},
		{"none", nil, http.StatusCreated, "bypass"},
		{"two headers", []string{"a", "b"}, http.StatusBadRequest, "invalid-key"},
		{"folded list", []string{"a, b"}, http.StatusBadRequest, "invalid-key"},
		{"empty", []string{`""`}, http.StatusBadRequest, "invalid-key"},
		{"unclosed", []string{`"abc`}, http.StatusBadRequest, "invalid-key"},
		{"parameters", []string{`"abc";p=1`}, http.StatusBadRequest, "invalid-key"},
		{"bad escape", []string{`"a\b"`}, http.StatusBadRequest, "invalid-key"},
		{"space", []string{`"a b"`}, http.StatusBadRequest, "invalid-key"},
		{"not ASCII", []string{"é"}, http.StatusBadRequest, "invalid-key"},
		{"256 bytes", []string{long + "k"}, http.StatusBadRequest, "invalid-key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newIdemEnv(t)
			var runs atomic.Int64
			h := e.mux(t, counted(&runs))
			r := pay("1", "", "")
			for _, v := range tc.values {
				r.Header.Add(IdempotencyKeyHeader, v)
			}
			w := serve(h, r)
			if tc.status == http.StatusBadRequest {
				checkProblem(t, w, tc.status)
			} else if w.Code != tc.status {
				t.Fatalf("status = %d, want %d", w.Code, tc.status)
			}
			e.checkOutcomes(t, tc.outcome)
			if tc.outcome == "bypass" && len(e.mr.Keys()) != 0 {
				t.Fatalf("a request without a key left keys %q", e.mr.Keys())
			}
		})
	}
	t.Run("required", func(t *testing.T) {
		e := newIdemEnv(t)
		var runs atomic.Int64
		checkProblem(t, serve(e.mux(t, counted(&runs), WithKeyRequired()), pay("1", "", "")), http.StatusBadRequest)
		e.checkOutcomes(t, "missing-key")
		if runs.Load() != 0 {
			t.Fatal("the handler ran without the required key")
		}
	})
}

func TestIdempotentRequestBodyLimit(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithMaxRequestBody(10))
	checkProblem(t, serve(h, pay("1", "k1", "01234567890")), http.StatusRequestEntityTooLarge)
	chunked := pay("1", "k2", "")
	chunked.Body, chunked.ContentLength = io.NopCloser(strings.NewReader("01234567890")), -1
	checkProblem(t, serve(h, chunked), http.StatusRequestEntityTooLarge)
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
		if ttl := e.mr.TTL(answerKey); ttl != time.Hour {
			t.Fatalf("the answer's TTL = %v, want 1h (status %d)", ttl, status)
		}
	}
	e.mr.FastForward(time.Hour)
	if e.mr.Exists(answerKey) {
		t.Fatal("the answer outlived its retention")
	}
	serve(h, pay("1", "k", ""))
	if runs.Load() != 2 {
		t.Fatalf("after the retention the handler ran %d times in all, want 2", runs.Load())
	}
	for _, k := range e.mr.Keys() {
		if strings.HasPrefix(k, DefaultKeyPrefix) && e.mr.TTL(k) <= 0 {
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
	checkProblem(t, serve(h, pay("1", "k", "")), http.StatusBadRequest)
	e.checkOutcomes(t, "missing-scope")
}

func TestIdempotentKeys(t *testing.T) {
	a, run := keys("p:", "POST", "/orders/{id}", "u:1", "k:1")
	if a != "p:answer:POST:%2Forders%2F%7Bid%7D:u%3A1:k%3A1" || run != "p:run:POST:%2Forders%2F%7Bid%7D:u%3A1:k%3A1" {
		t.Fatalf("keys = %q, %q", a, run)
	}
	seen := map[string]bool{}
	for _, parts := range [][4]string{
		{"POST", "/a", "", "b:c"}, {"POST", "/a:b", "", "c"}, {"POST", "/a", "b", "c"},
		{"POST", "/a", "", "%3A"}, {"PUT", "/a", "", "b:c"},
	} {
		k, _ := keys("p:", parts[0], parts[1], parts[2], parts[3])
		if seen[k] {
			t.Fatalf("%q: a key of other parts", k)
		}
		seen[k] = true
	}
	long, _ := keys("p:", "POST", strings.Repeat("/x", 500), strings.Repeat("u", 500), strings.Repeat("k", 255))
	if len(long) > 300 {
		t.Fatalf("long values give a key of %d bytes, want them hashed", len(long))
	}
}

func TestIdempotentFencedStore(t *testing.T) {
	e := newIdemEnv(t)
	ctx := context.Background()
	a := &storedAnswer{status: 201, header: http.Header{}, body: []byte("x")}
	for _, step := range []struct {
		token  uint64
		stored bool
	}{
		{0, true}, {0, false}, {9, true}, {9, false}, {5, false}, {10, true}, {0, false},
		{1 << 62, true}, {1<<62 - 1, false}, {1<<62 + 1, true},
	} {
		a.body = []byte{byte(step.token)}
		ok, err := storeAnswer(ctx, e.rdb, "a", step.token, time.Minute, a)
		if err != nil || ok != step.stored {
			t.Fatalf("store with token %d: %v, %v; want %v", step.token, ok, err, step.stored)
		}
		if tok := e.mr.HGet("a", "token"); ok && tok != strconv.FormatUint(step.token, 10) {
			t.Fatalf("stored token %s, want %d", tok, step.token)
		}
	}
}

func TestIdempotentConflict(t *testing.T) {
	e := newIdemEnv(t)
	var runs atomic.Int64
	h := e.mux(t, counted(&runs), WithRetryAfter(3*time.Second))
	_, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	_, unlock, err := e.locker.TryLock(context.Background(), run, lock.WithLease(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	w := serve(h, pay("1", "k", ""))
	checkProblem(t, w, http.StatusConflict)
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
	if e.mr.Exists(answer) {
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
			_, err := NewIdempotency(mr.locker, mr.rdb, WithLockOptions(lock.WithLease(-1)))
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
