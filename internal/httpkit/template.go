package httpkit

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lockkit/lockkit/lock"
)

// Request is a request as a key template reads it; each framework
// implements it on its request type. Every method returns "" for a value
// the request lacks.
type Request interface {
	PathValue(name string) string // the path parameter name
	Query(name string) string     // the first value of query parameter name
	Header(name string) string    // the first value of header name
	Value(name string) string     // the named value {value.name}
	// Route returns the pattern of the route the request matched, "" when
	// unknown, and whether it declares the path parameter name.
	Route(name string) (pattern string, declared bool)
}

// source is where a placeholder takes its value from.
type source int

const (
	fromParam source = iota
	fromQuery
	fromHeader
	fromValue
)

// sourceNames are the prefixes of placeholders, indexed by source.
var sourceNames = [...]string{"param", "query", "header", "value"}

// sourceLabels name a source in messages, indexed by source.
var sourceLabels = [...]string{"path parameter", "query parameter", "header", "value"}

// placeholder is one {...} of a template.
type placeholder struct {
	src  source
	name string
}

// Template is a parsed key template: literal text with placeholders
// {name} or {param.name} (path parameter), {query.name}, {header.Name}
// and {value.name}, each set apart from its neighbours by a separator
// that escaping never produces. Its keys are at most [lock.MaxKeyLen]
// bytes long.
type Template struct {
	pkg   *Pkg
	text  string // as declared
	lits  []string
	holes []placeholder // len(lits) == len(holes)+1
}

// ParseTemplate parses text, a template of package pkg's middlewares.
// Errors name the problem and its byte offset, not the template (the
// caller adds it).
func ParseTemplate(pkg *Pkg, text string) (*Template, error) {
	if text == "" {
		return nil, errors.New("empty template")
	}
	t := &Template{pkg: pkg, text: text}
	lit := 0 // where the current literal starts
	for i := 0; i < len(text); i++ {
		switch text[i] {
		case '}':
			return nil, fmt.Errorf("'}' at byte %d closes no placeholder", i)
		case '{':
			end := strings.IndexAny(text[i+1:], "{}") + i + 1
			if end == i || text[end] == '{' {
				return nil, fmt.Errorf("'{' at byte %d is not closed", i)
			}
			p, err := parsePlaceholder(text[i+1:end], i)
			if err != nil {
				return nil, err
			}
			if i > 0 && !separates(text[i-1]) || end+1 < len(text) && !separates(text[end+1]) {
				return nil, fmt.Errorf("placeholder %s at byte %d must be set apart from the text "+
					"or placeholder next to it by a separator such as ':' or '/' "+
					"(letters, digits, '-', '.', '_', '~' and '%%' do not separate)", text[i:end+1], i)
			}
			t.lits = append(t.lits, text[lit:i])
			t.holes = append(t.holes, p)
			lit = end + 1
			i = end
		}
	}
	t.lits = append(t.lits, text[lit:])
	if n := t.maxKeyLen(); n > lock.MaxKeyLen {
		return nil, fmt.Errorf("its keys can be %d bytes long, more than lock.MaxKeyLen (%d)", n, lock.MaxKeyLen)
	}
	return t, nil
}

// String returns the template as declared.
func (t *Template) String() string { return t.text }

// separates reports whether b, next to a placeholder, keeps the value
// apart from the text around it: escaped values never contain it.
func separates(b byte) bool {
	return !unreserved(b) && b != '%' && b != '{' && b != '}'
}

// parsePlaceholder parses the text between '{' and '}' of the placeholder
// at byte at.
func parsePlaceholder(inner string, at int) (placeholder, error) {
	if inner == "" {
		return placeholder{}, fmt.Errorf("empty placeholder {} at byte %d", at)
	}
	p := placeholder{src: fromParam, name: inner}
	if prefix, name, ok := strings.Cut(inner, "."); ok {
		i := slices.Index(sourceNames[:], prefix)
		if i < 0 {
			return placeholder{}, fmt.Errorf("placeholder {%s} at byte %d: unknown source %q "+
				"(want param, query, header or value; write {param.%s} for a path parameter with a dot)",
				inner, at, prefix, inner)
		}
		p = placeholder{src: source(i), name: name}
	}
	if err := checkName(p.src, p.name); err != nil {
		return placeholder{}, fmt.Errorf("placeholder {%s} at byte %d: %w", inner, at, err)
	}
	return p, nil
}

// checkName checks the name of a placeholder or of a named value.
func checkName(src source, name string) error {
	if name == "" {
		return errors.New("no name")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c <= ' ' || c == 0x7f:
			return fmt.Errorf("name %q contains a space or control character", name)
		case c == '{' || c == '}':
			return fmt.Errorf("name %q contains a brace", name)
		case src == fromHeader && !isTokenChar(c):
			return fmt.Errorf("%q is not a valid header name", name)
		}
	}
	return nil
}

// isTokenChar reports whether c may appear in an HTTP header name
// (a token, RFC 9110 section 5.6.2).
func isTokenChar(c byte) bool {
	return unreserved(c) || strings.IndexByte("!#$%&'*+^`|", c) >= 0
}

// maxKeyLen is the longest key t renders.
func (t *Template) maxKeyLen() int {
	n := len(t.holes) * MaxValueLen
	for _, l := range t.lits {
		n += len(l)
	}
	return n
}

// Key renders the key of r: the template with each placeholder replaced
// by r's value, escaped with [WriteValue]. It fails with a
// [*MissingError] when a value is missing or empty, and with an error
// wrapping [ErrMisconfigured] when a path parameter is missing because
// r's route does not declare it.
func Key[R Request](t *Template, r R) (string, error) {
	var b strings.Builder
	b.Grow(len(t.lits[0]) + 16*len(t.holes))
	b.WriteString(t.lits[0])
	for i := range t.holes {
		p := &t.holes[i]
		var v string
		switch p.src {
		case fromParam:
			v = r.PathValue(p.name)
			if v != "" {
				break
			}
			if route, ok := r.Route(p.name); route != "" && !ok {
				return "", fmt.Errorf("%s: template %q: route %q has no path parameter %q: %w",
					t.pkg.Name, t.text, route, p.name, ErrMisconfigured)
			}
		case fromQuery:
			v = r.Query(p.name)
		case fromHeader:
			v = r.Header(p.name)
		case fromValue:
			v = r.Value(p.name)
		}
		if v == "" {
			return "", &MissingError{What: sourceLabels[p.src] + " " + strconv.Quote(p.name), pkg: t.pkg}
		}
		WriteValue(&b, v)
		b.WriteString(t.lits[i+1])
	}
	return b.String(), nil
}

// NamedValue is the function of a placeholder {value.Name}, given its
// value for a request of type R.
type NamedValue[R any] struct {
	Name string
	Fn   func(R) string
}

// BindValues checks the named values of t, values, and returns their
// functions by name: each {value.name} placeholder must have exactly one,
// with a non-nil function, and each must be used. Errors name the
// WithValue or placeholder at fault.
func BindValues[R any](t *Template, values []NamedValue[R]) (map[string]func(R) string, error) {
	fns := make(map[string]func(R) string, len(values))
	for _, v := range values {
		if err := checkName(fromValue, v.Name); err != nil {
			return nil, fmt.Errorf("WithValue(%q): %w", v.Name, err)
		}
		if v.Fn == nil {
			return nil, fmt.Errorf("WithValue(%q): nil function", v.Name)
		}
		if fns[v.Name] != nil {
			return nil, fmt.Errorf("WithValue(%q) is given twice", v.Name)
		}
		fns[v.Name] = v.Fn
	}
	used := make(map[string]bool, len(values))
	for _, p := range t.holes {
		if p.src != fromValue {
			continue
		}
		if fns[p.name] == nil {
			return nil, fmt.Errorf("placeholder {value.%s} has no WithValue(%q, ...)", p.name, p.name)
		}
		used[p.name] = true
	}
	for _, v := range values {
		if !used[v.Name] {
			return nil, fmt.Errorf("WithValue(%q): the template has no placeholder {value.%s}", v.Name, v.Name)
		}
	}
	return fns, nil
}
