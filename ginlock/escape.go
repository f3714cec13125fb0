package ginlock

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// maxPlainValue is the longest escaped value written into a key as it is;
// longer values are replaced by "%h" and their SHA-256 digest in hex, so
// every value takes at most maxValueLen bytes of the key.
const (
	maxPlainValue = 64
	maxValueLen   = 2 + 2*sha256.Size
)

const upperHex = "0123456789ABCDEF"

// unreserved reports whether b is kept as it is in an escaped value: an
// ASCII letter or digit, '-', '.', '_' or '~' (the unreserved characters
// of URLs). Every other byte is percent-encoded.
func unreserved(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// writeValue writes v to b so that distinct values give distinct text made
// only of unreserved bytes and '%': bytes outside the unreserved set
// become %XX (upper-case hex), and when that is longer than maxPlainValue
// the text is "%h" and the hex SHA-256 of v instead. 'h' is no hex digit,
// so a digest never reads as an escaped value.
func writeValue(b *strings.Builder, v string) {
	n := len(v)
	for i := 0; i < len(v); i++ {
		if !unreserved(v[i]) {
			n += 2
		}
	}
	if n > maxPlainValue {
		sum := sha256.Sum256([]byte(v))
		var digest [2 * sha256.Size]byte
		hex.Encode(digest[:], sum[:])
		b.WriteString("%h")
		b.Write(digest[:])
		return
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
}
