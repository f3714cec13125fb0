package httpkit

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxValueLen is the most bytes [WriteValue] writes for one value.
const MaxValueLen = 2 + 2*sha256.Size

// maxPlainValue is the longest escaped value written as it is; longer
// values are replaced by "%h" and their SHA-256 digest in hex.
const maxPlainValue = 64

const upperHex = "0123456789ABCDEF"

// unreserved reports whether b is kept as it is in an escaped value: an
// ASCII letter or digit, '-', '.', '_' or '~' (the unreserved characters
// of URLs). Every other byte is percent-encoded.
func unreserved(b byte) bool {
	return 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9' ||
		b == '-' || b == '.' || b == '_' || b == '~'
}

// WriteValue writes v to b so that distinct values give distinct text
// made only of unreserved bytes (ASCII letters, digits, "-._~") and '%':
// every other byte becomes %XX (upper-case hex), and when that is longer
// than 64 bytes the text is "%h" and the hex SHA-256 of v instead ('h' is
// no hex digit, so a digest never reads as an escaped value). It writes
// at most [MaxValueLen] bytes.
func WriteValue(b *strings.Builder, v string) {
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
