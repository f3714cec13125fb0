package ginlock_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/ginlock"
)

// runOn runs h in a context of r for a request with path parameter id and
// query q, and returns the key it asked rec for, or the error it passed
// to c.Error.
func runOn(r *gin.Engine, h gin.HandlerFunc, rec *keyRecorder, id string, q url.Values) (string, error) {
	c := gin.CreateTestContextOnly(httptest.NewRecorder(), r)
	c.Request = httptest.NewRequest(http.MethodPost, "/?"+q.Encode(), nil)
	c.Params = gin.Params{{Key: "id", Value: id}}
	rec.keys = nil
	h(c)
	if len(c.Errors) > 0 {
		return "", c.Errors[0].Err
	}
	return rec.keys[0], nil
}

// FuzzTemplate checks that any template is either rejected by Validate
// with New panicking, or accepted by both, and then gives a key or a
// missing-value error for every request.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"orders:{id}", "orders:{id", "{}", "}{", "{a}{b}", "a:{query.q}:{header.X}", "{value.v}",
		"{param.a.b}", "{{id}}", "x", "", "%{id}%", "\xff:{id}", "{cookie.c}", "{header.a b}",
	} {
		f.Add(s)
	}
	r := gin.New()
	f.Fuzz(func(t *testing.T, text string) {
		err := ginlock.Validate(text)
		rec := &keyRecorder{}
		var h gin.HandlerFunc
		panicked := func() (p any) {
			defer func() { p = recover() }()
			h = ginlock.New(rec, text)
			return nil
		}()
		if (err == nil) != (panicked == nil) {
			t.Fatalf("Validate(%q) = %v but New panicked with %v", text, err, panicked)
		}
		if err != nil {
			return
		}
		key, err := runOn(r, h, rec, "7", url.Values{})
		switch {
		case err != nil && !errors.Is(err, ginlock.ErrMissingValue):
			t.Fatalf("template %q: %v", text, err)
		case err == nil && !strings.Contains(text, "{") && key != text:
			t.Fatalf("template %q without placeholders gave key %q", text, key)
		case err == nil && key == "":
			t.Fatalf("template %q gave an empty key", text)
		}
	})
}

// FuzzDistinctKeys checks that distinct values never give the same key,
// within one template and across two templates that differ after a value.
func FuzzDistinctKeys(f *testing.F) {
	f.Add("1", "a", "1:a", "")
	f.Add("1:other", "x", "1", "other:x")
	f.Add("%3A", "b", ":", "b")
	f.Add(strings.Repeat("x", 64), "%h", strings.Repeat("x", 65), "b")
	f.Add("\xff", "{b}", "%FF", "%7Bb%7D")
	r := gin.New()
	f.Fuzz(func(t *testing.T, id1, q1, id2, q2 string) {
		if id1 == "" || id2 == "" || q1 == "" || q2 == "" {
			return // missing values: tested elsewhere
		}
		rec := &keyRecorder{}
		one := ginlock.New(rec, "k:{id}")
		two := ginlock.New(rec, "k:{id}:{query.q}")
		key := func(h gin.HandlerFunc, id, q string) string {
			k, err := runOn(r, h, rec, id, url.Values{"q": {q}})
			if err != nil {
				t.Fatalf("id %q q %q: %v", id, q, err)
			}
			return k
		}
		if (key(two, id1, q1) == key(two, id2, q2)) != (id1 == id2 && q1 == q2) {
			t.Fatalf("(%q, %q) and (%q, %q): keys %q and %q", id1, q1, id2, q2, key(two, id1, q1), key(two, id2, q2))
		}
		if (key(one, id1, "") == key(one, id2, "")) != (id1 == id2) {
			t.Fatalf("%q and %q: keys %q and %q", id1, id2, key(one, id1, ""), key(one, id2, ""))
		}
		if k := key(one, id1, ""); k == key(two, id2, q2) {
			t.Fatalf("k:{id} with %q and k:{id}:{query.q} with (%q, %q) both give %q", id1, id2, q2, k)
		}
	})
}
