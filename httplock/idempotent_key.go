package httplock

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"net/http"
	"strings"

	"github.com/lockkit/lockkit/internal/httpkit"
)

// IdempotencyKeyHeader is the request header field that carries the
// client's key (draft-ietf-httpapi-idempotency-key-header-07, section
// "The Idempotency-Key HTTP Request Header Field"). Its value is an RFC
// 8941 String ("..." with \" and \\ escapes, no parameters), or the key
// bare, as many clients send it; either way the key is 1 to 255 bytes of
// visible ASCII (0x21 to 0x7E), and a bare key holds no '"' or ',' (a
// proxy's folding of two fields). A request with more than one field is
// answered 400.
const IdempotencyKeyHeader = "Idempotency-Key"

// ReplayedHeader marks a replayed answer: its value is "true".
const ReplayedHeader = "Idempotent-Replayed"

// maxKeyLen is the longest Idempotency-Key value accepted, in bytes.
const maxKeyLen = 255

var (
	errNoKey      = errors.New("the request has no Idempotency-Key header")
	errManyKeys   = errors.New("the request has more than one Idempotency-Key header")
	errInvalidKey = errors.New("the Idempotency-Key header is not a string of 1 to 255 visible ASCII characters")
)

// parseKey returns the Idempotency-Key of h. The draft makes the field an
// RFC 8941 Item of type String ("..." with \" and \\ escapes); a bare value,
// as many clients send, is accepted too. Either way the key is 1 to 255
// bytes of visible ASCII (0x21 to 0x7E); a bare value has no '"' or ','
// (a list folded by a proxy), and a quoted one no parameters.
func parseKey(h http.Header) (string, error) {
	vs := h.Values(IdempotencyKeyHeader)
	switch {
	case len(vs) == 0:
		return "", errNoKey
	case len(vs) > 1:
		return "", errManyKeys
	}
	v := strings.Trim(vs[0], " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		var ok bool
		if key, ok = unquote(v); !ok {
			return "", errInvalidKey
		}
	} else {
		if strings.ContainsAny(v, `",`) {
			return "", errInvalidKey
		}
		key = v
	}
	if len(key) == 0 || len(key) > maxKeyLen {
		return "", errInvalidKey
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "", errInvalidKey
		}
	}
	return key, nil
}

// unquote parses v as a whole RFC 8941 sf-string and returns its value.
func unquote(v string) (string, bool) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			i++
			if i == len(v) || v[i] != '"' && v[i] != '\\' {
				return "", false
			}
			b.WriteByte(v[i])
		case '"':
			return b.String(), i == len(v)-1
		default:
			if c < 0x20 || c > 0x7e {
				return "", false
			}
			b.WriteByte(c)
		}
	}
	return "", false // not closed
}

// keys returns the Redis key of the stored answer and the lock key of the
// run for a request: prefix, then "answer:" or "run:", then the escaped
// method, route, scope and key, separated by ':' (which escaping never
// leaves in a value, so distinct requests get distinct keys).
func keys(prefix, method, route, scope, key string) (answer, run string) {
	var b strings.Builder
	for _, v := range []string{method, route, scope, key} {
		b.WriteByte(':')
		httpkit.WriteValue(&b, v)
	}
	tail := b.String()[1:]
	return prefix + "answer:" + tail, prefix + "run:" + tail
}

// fingerprint is the request's fingerprint (draft section "Idempotency
// Fingerprint"): the SHA-256 of its method, escaped path and body, each
// preceded by its length so that no two requests share the input.
func fingerprint(method, path string, body []byte) [sha256.Size]byte {
	h := sha256.New()
	writePart(h, []byte(method))
	writePart(h, []byte(path))
	writePart(h, body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func writePart(h hash.Hash, p []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
	h.Write(p)
}

// keyDigest names a key in logs without showing it: the first 8 bytes of
// its SHA-256, in hex.
func keyDigest(key string) string {
	sum := sha256.Sum256([]byte(key))
	const hexDigits = "0123456789abcdef"
	var b [16]byte
	for i, c := range sum[:8] {
		b[2*i], b[2*i+1] = hexDigits[c>>4], hexDigits[c&15]
	}
	return string(b[:])
}
