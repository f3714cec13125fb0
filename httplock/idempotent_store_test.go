package httplock

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
		if tok := e.srv.HGet("a", "token"); ok && tok != strconv.FormatUint(step.token, 10) {
			t.Fatalf("stored token %s, want %d", tok, step.token)
		}
	}
}

func TestIdempotentAnswerEncoding(t *testing.T) {
	e := newIdemEnv(t)
	ctx := context.Background()
	want := &storedAnswer{status: 418, body: []byte{0, '\r', '\n', 0xff},
		header: http.Header{"Content-Type": {"a/b; x=\"1:2\""}, "Location": {"/x\n", ""}, "X-Empty": {"v"}}}
	copy(want.fp[:], strings.Repeat("\x00\xff", 16))
	if ok, err := storeAnswer(ctx, e.rdb, "a", 1, time.Minute, want); !ok || err != nil {
		t.Fatalf("store: %v %v", ok, err)
	}
	got, err := loadAnswer(ctx, e.rdb, "a")
	if err != nil || got.status != want.status || got.fp != want.fp || string(got.body) != string(want.body) ||
		len(got.header) != len(want.header) {
		t.Fatalf("loaded %+v, %v; want %+v", got, err, want)
	}
	for name, vs := range want.header {
		if strings.Join(got.header[name], "|") != strings.Join(vs, "|") {
			t.Fatalf("header %s = %q, want %q", name, got.header[name], vs)
		}
	}
	if a, err := loadAnswer(ctx, e.rdb, "none"); a != nil || err != nil {
		t.Fatalf("no answer: %v, %v", a, err)
	}
	e.srv.HSet("bad", "fp", "short", "status", "200")
	if _, err := loadAnswer(ctx, e.rdb, "bad"); err != errMalformed {
		t.Fatalf("a malformed hash: %v, want errMalformed", err)
	}
}
