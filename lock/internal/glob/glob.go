// Package glob matches keys against Redis glob patterns as Redis does, and
// turns a pattern over keys into a SCAN pattern over the names that store
// them.
package glob

import (
	"fmt"
	"strings"
)

// escaper escapes the characters that SCAN's MATCH would read as a
// pattern.
var escaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

// ScanMatch turns pattern, a glob over keys, into a SCAN MATCH pattern
// over the lock hash names prefix:{tag} that matches at least every name
// whose key matches, where tag is the key escaped with tag: literal bytes
// are escaped as tag escapes them (then for the glob), and since '?' and a
// class may stand for a byte stored as several ('%' as "%25"), each
// becomes '*'. The scan's names are then filtered with Match on their
// keys.
func ScanMatch(prefix, pattern string, tag *strings.Replacer) string {
	var b strings.Builder
	b.WriteString(escaper.Replace(prefix) + ":{")
	star := false // the last thing written is a '*'
	wild := func() {
		if !star {
			b.WriteByte('*')
		}
		star = true
	}
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '*', '?':
			wild()
			continue
		case '[':
			i += classLen(pattern[i+1:])
			wild()
			continue
		case '\\':
			i = min(i+1, len(pattern)-1)
		}
		b.WriteString(escaper.Replace(tag.Replace(pattern[i : i+1])))
		star = false
	}
	b.WriteByte('}')
	return b.String()
}

// classLen is the length of a class's body p (after its '['), with its
// closing ']'.
func classLen(p string) int {
	i := 0
	for i < len(p) && p[i] != ']' {
		if p[i] == '\\' {
			i++
		}
		i++
	}
	return min(i+1, len(p))
}

// Match reports whether s matches pattern as Redis matches a glob
// (byte by byte): '*' any bytes, '?' one byte, [abc], [^abc] and [a-z]
// one byte of a class, '\' escapes the byte after it. It backtracks to
// the last '*' only, so it runs in time linear in len(pattern)*len(s).
func Match(pattern, s string) bool {
	p, i := 0, 0
	starP, starI := -1, 0
	for i < len(s) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				starP, starI = p, i
				p++
				continue
			case '?':
				p, i = p+1, i+1
				continue
			case '[':
				n, ok := matchClass(pattern[p+1:], s[i])
				if ok {
					p, i = p+1+n, i+1
					continue
				}
			default:
				if c == '\\' && p+1 < len(pattern) {
					c = pattern[p+1]
					if c == s[i] {
						p, i = p+2, i+1
						continue
					}
				} else if c == s[i] {
					p, i = p+1, i+1
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		starI++
		p, i = starP+1, starI
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// matchClass reports whether c is in the class whose body (after its '[')
// starts p, and the length of that body with its ']'.
func matchClass(p string, c byte) (int, bool) {
	i, not, in := 0, false, false
	if i < len(p) && p[i] == '^' {
		not, i = true, i+1
	}
	for i < len(p) && p[i] != ']' {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			in = in || p[i+1] == c
			i += 2
		case i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']':
			lo, hi := min(p[i], p[i+2]), max(p[i], p[i+2])
			in = in || (lo <= c && c <= hi)
			i += 3
		default:
			in = in || p[i] == c
			i++
		}
	}
	return min(i+1, len(p)), in != not
}

// Check reports an error for a pattern that Match and Redis would read
// differently: a '[' without its ']', a trailing '\', a class ending in
// '-' (Redis reads a range up to the ']' and goes on).
func Check(pattern string) error {
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			if i == len(pattern)-1 {
				return fmt.Errorf("pattern %q ends in an escape '\\'", pattern)
			}
			i++
		case '[': // read as matchClass and Redis read it
			j := i + 1
			if j < len(pattern) && pattern[j] == '^' {
				j++
			}
			for j < len(pattern) && pattern[j] != ']' {
				switch {
				case pattern[j] == '\\':
					j += 2
				case j+2 < len(pattern) && pattern[j+1] == '-':
					if pattern[j+2] == ']' { // Redis would read a range up to ']' and go on
						return fmt.Errorf("pattern %q: a class ends in '-' (put the '-' first or escape it)", pattern)
					}
					j += 3
				default:
					j++
				}
			}
			if j >= len(pattern) {
				return fmt.Errorf("pattern %q has a '[' without its ']'", pattern)
			}
			i = j
		}
	}
	return nil
}
