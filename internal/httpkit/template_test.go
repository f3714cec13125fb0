package httpkit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/httpkit"
)

// request is an httpkit.Request of fixed values; route is the pattern of
// its route, declaring the path parameters in declared.
type request struct {
	params, query, header, values map[string]string
	route                         string
	declared                      []string
}

func (r request) PathValue(name string) string { return r.params[name] }
func (r request) Query(name string) string     { return r.query[name] }
func (r request) Header(name string) string    { return r.header[name] }
func (r request) Value(name string) string     { return r.values[name] }
func (r request) Route(name string) (string, bool) {
	for _, d := range r.declared {
		if d == name {
			return r.route, true
		}
	}
	return r.route, false
}

func TestKey(t *testing.T) {
	tmpl, err := httpkit.ParseTemplate(pkg, "t:{header.X-T}:{query.y}:{value.u}:orders:{id}")
	if err != nil {
		t.Fatal(err)
	}
	r := request{
		params: map[string]string{"id": "a:b"}, query: map[string]string{"y": "2026"},
		header: map[string]string{"X-T": "acme"}, values: map[string]string{"u": "ü"},
	}
	key, err := httpkit.Key(tmpl, r)
	if want := "t:acme:2026:%C3%BC:orders:a%3Ab"; err != nil || key != want {
		t.Fatalf("Key = %q, %v; want %q", key, err, want)
	}

	r.params = nil
	r.route, r.declared = "POST /orders/{id}", []string{"id"}
	if _, err := httpkit.Key(tmpl, r); !errors.Is(err, errMissing) || err.Error() != `test: path parameter "id" is missing or empty` {
		t.Errorf("declared but empty: %v", err)
	}
	r.declared = nil
	if _, err := httpkit.Key(tmpl, r); !errors.Is(err, httpkit.ErrMisconfigured) {
		t.Errorf("undeclared: %v, want ErrMisconfigured", err)
	}
}

func TestWriteValue(t *testing.T) {
	for v, want := range map[string]string{
		"42": "42", "a-b.c_d~": "a-b.c_d~", "a b/%": "a%20b%2F%25",
		strings.Repeat("x", 64): strings.Repeat("x", 64),
		strings.Repeat("x", 65): "%h",
	} {
		var b strings.Builder
		httpkit.WriteValue(&b, v)
		got := b.String()
		if strings.HasPrefix(want, "%h") {
			if !strings.HasPrefix(got, "%h") || len(got) != httpkit.MaxValueLen {
				t.Errorf("WriteValue(%d bytes) = %q, want a digest of %d bytes", len(v), got, httpkit.MaxValueLen)
			}
			continue
		}
		if got != want {
			t.Errorf("WriteValue(%q) = %q, want %q", v, got, want)
		}
	}
}

func TestBindValues(t *testing.T) {
	tmpl, err := httpkit.ParseTemplate(pkg, "u:{value.user}")
	if err != nil {
		t.Fatal(err)
	}
	user := func(string) string { return "" }
	for _, tt := range []struct {
		values []httpkit.NamedValue[string]
		want   string
	}{
		{nil, `placeholder {value.user} has no WithValue("user", ...)`},
		{[]httpkit.NamedValue[string]{{"user", nil}}, `WithValue("user"): nil function`},
		{[]httpkit.NamedValue[string]{{"user", user}, {"user", user}}, `WithValue("user") is given twice`},
		{[]httpkit.NamedValue[string]{{"user", user}, {"org", user}}, `WithValue("org"): the template has no placeholder {value.org}`},
	} {
		if _, err := httpkit.BindValues(tmpl, tt.values); err == nil || err.Error() != tt.want {
			t.Errorf("BindValues(%d values) = %v, want %q", len(tt.values), err, tt.want)
		}
	}
	if fns, err := httpkit.BindValues(tmpl, []httpkit.NamedValue[string]{{"user", user}}); err != nil || fns["user"] == nil {
		t.Errorf("BindValues = %v, %v", fns, err)
	}
}
