package cronlock

import (
	"unicode/utf8"

	"github.com/lockkit/lockkit/lock"
)

// named returns opts after a [lock.WithName] that names a job's lock
// after its key ("cronlock:run:<job>", "cronlock:tick:<job>"): one name
// per job whatever the tick, for the lock's telemetry. A key that
// WithName would refuse (too long, not UTF-8) gets no name.
func named(key string, opts ...lock.LockOption) []lock.LockOption {
	if len(key) > lock.MaxNameLen || !utf8.ValidString(key) {
		return opts
	}
	return append([]lock.LockOption{lock.WithName(key)}, opts...)
}
