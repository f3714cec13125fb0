package otellock

import "strings"

// otherName is the lock.name of keys without a constant part.
const otherName = "_OTHER"

// maxNameSegment is the longest key segment DefaultLockName keeps, in
// bytes.
const maxNameSegment = 32

// DefaultLockName is the default lock.name of a key: the key up to its
// first ':'-separated segment that looks variable, without that segment
// and the rest. A segment looks constant when it has 1 to 32 bytes, all
// ASCII letters, '_', '-' or '.'; any digit, other character or greater
// length makes it variable. When the first segment is variable the name is
// "_OTHER".
//
//	orders:42              → orders
//	orders:42:items        → orders
//	cron:nightly-report:17 → cron:nightly-report
//	billing                → billing
//	3f2a9c                 → _OTHER
//
// Segments made of letters only, such as user names, look constant: give
// keys like "users:alice" a name function with [WithLockName].
func DefaultLockName(key string) string {
	end := 0 // length of the constant prefix
	for rest := key; ; {
		seg, tail, more := strings.Cut(rest, ":")
		if !constantSegment(seg) {
			break
		}
		end += len(seg)
		if !more {
			break
		}
		end++ // the ':' after seg
		rest = tail
	}
	name := strings.TrimSuffix(key[:end], ":")
	if name == "" {
		return otherName
	}
	return name
}

func constantSegment(s string) bool {
	if s == "" || len(s) > maxNameSegment {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}
