package httplock

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

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
		{"space quoted", []string{`" a b "`}, http.StatusCreated, "ran"},
		{"space bare", []string{"a b"}, http.StatusBadRequest, "invalid-key"},
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
				locktest.CheckProblem(t, w, tc.status)
			} else if w.Code != tc.status {
				t.Fatalf("status = %d, want %d", w.Code, tc.status)
			}
			e.checkOutcomes(t, tc.outcome)
			if tc.outcome == "bypass" && len(e.srv.Keys()) != 0 {
				t.Fatalf("a request without a key left keys %q", e.srv.Keys())
			}
		})
	}
	t.Run("required", func(t *testing.T) {
		e := newIdemEnv(t)
		var runs atomic.Int64
		locktest.CheckProblem(t, serve(e.mux(t, counted(&runs), WithKeyRequired()), pay("1", "", "")), http.StatusBadRequest)
		e.checkOutcomes(t, "missing-key")
		if runs.Load() != 0 {
			t.Fatal("the handler ran without the required key")
		}
	})
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

// FuzzIdempotencyKey checks that every accepted key is 1 to 255 bytes of
// visible ASCII, and that its sf-string form is accepted as the same key.
func FuzzIdempotencyKey(f *testing.F) {
	for _, s := range []string{`"a"`, "a", `"a\"b"`, `""`, `"a`, "a,b", `"a";p`, "é", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		key, err := parseKey(http.Header{IdempotencyKeyHeader: {v}})
		if err != nil {
			return
		}
		if len(key) == 0 || len(key) > maxKeyLen {
			t.Fatalf("%q: accepted key %q of %d bytes", v, key, len(key))
		}
		for i := 0; i < len(key); i++ {
			if key[i] < 0x21 || key[i] > 0x7e {
				t.Fatalf("%q: accepted key %q with byte %#x", v, key, key[i])
			}
		}
		quoted := `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(key) + `"`
		if again, err := parseKey(http.Header{IdempotencyKeyHeader: {quoted}}); err != nil || again != key {
			t.Fatalf("%q: the sf-string %s of key %q gives %q, %v", v, quoted, key, again, err)
		}
	})
}
