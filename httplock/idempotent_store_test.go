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
	const w, ours, refused = storeWritten, storeOurs, storeRefused
	for _, step := range []struct {
		token uint64
		want  storeResult
	}{
		{0, w}, {0, refused}, {9, w}, {9, ours}, {5, refused}, {10, w}, {0, refused},
		{1 << 62, w}, {1 << 62, ours}, {1<<62 - 1, refused}, {1<<62 + 1, w},
	} {
		before := e.srv.HGet("a", "body")
		a.body = []byte{byte(step.token)}
		got, err := storeAnswer(ctx, e.rdb, "a", step.token, time.Minute, a)
		if err != nil || got != step.want {
			t.Fatalf("store with token %d: %v, %v; want %v", step.token, got, err, step.want)
		}
		if body := e.srv.HGet("a", "body"); got != w && body != before {
			t.Fatalf("store with token %d, not written, changed the body from %q to %q", step.token, before, body)
		}
		if tok := e.srv.HGet("a", "token"); got == w && tok != strconv.FormatUint(step.token, 10) {
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
	if res, err := storeAnswer(ctx, e.rdb, "a", 1, time.Minute, want); res != storeWritten || err != nil {
		t.Fatalf("store: %v %v", res, err)
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
