package ginlock

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/lockkit/lockkit/lock"
)

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
	fn   func(*gin.Context) string // fromValue only, set from WithValue
}

// template is a parsed key template: len(lits) == len(holes)+1, and a key
// is lits[0], value of holes[0], lits[1], ... lits[n].
type template struct {
	text  string // as declared
	lits  []string
	holes []placeholder
}

// parseTemplate parses text. Errors name the problem and its byte offset,
// not the template (the caller adds it).
func parseTemplate(text string) (*template, error) {
	if text == "" {
		return nil, errors.New("empty template")
	}
	t := &template{text: text}
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

// checkName checks the name of a placeholder or a WithValue.
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
func (t *template) maxKeyLen() int {
	n := len(t.holes) * maxValueLen
	for _, l := range t.lits {
		n += len(l)
	}
	return n
}

// key renders the key of the request in c. It fails with a *missingError
// when a placeholder's value is missing or empty.
func (t *template) key(c *gin.Context) (string, error) {
	var b strings.Builder
	b.Grow(len(t.lits[0]) + 16*len(t.holes))
	b.WriteString(t.lits[0])
	for i := range t.holes {
		p := &t.holes[i]
		v := p.value(c)
		if v == "" && p.src == fromParam && c.FullPath() != "" && !routeHas(c.FullPath(), p.name) {
			return "", fmt.Errorf("ginlock: template %q: route %q has no path parameter %q: %w",
				t.text, c.FullPath(), p.name, errMisconfigured)
		}
		if v == "" {
			return "", &missingError{what: sourceLabels[p.src] + " " + strconv.Quote(p.name)}
		}
		writeValue(&b, v)
		b.WriteString(t.lits[i+1])
	}
	return b.String(), nil
}

// value returns the placeholder's value for the request in c: the path
// parameter, the first query value, the first header value, or what the
// WithValue function returns.
func (p *placeholder) value(c *gin.Context) string {
	switch p.src {
	case fromQuery:
		return c.Query(p.name)
	case fromHeader:
		return c.GetHeader(p.name)
	case fromValue:
		return p.fn(c)
	}
	return c.Param(p.name)
}

// errMisconfigured is wrapped by the error of a template that does not
// fit its route: a server fault, answered 500, not the client's.
var errMisconfigured = errors.New("the key template does not fit the route")

// routeHas reports whether the route pattern path (gin's FullPath) has a
// parameter name (":name" or "*name").
func routeHas(path, name string) bool {
	for seg := range strings.SplitSeq(path, "/") {
		if seg == ":"+name || seg == "*"+name {
			return true
		}
	}
	return false
}
