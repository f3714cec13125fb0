package cronlock

import (
	"unicode/utf8"

	"github.com/lockkit/lockkit/lock"
)

// lockNamePrefix starts the telemetry name of a job's locks.
const lockNamePrefix = "cronlock:"

// named returns opts after a [lock.WithName] that names the locks of job
// "cronlock:<job>": one name per job, the run lock and the tick marker
// alike (observers tell the marker by [lock.Integration.Internal]), whatever the
// tick. A name that WithName would refuse (too long, not UTF-8) gets no
// name.
func named(job string, opts ...lock.LockOption) []lock.LockOption {
	name := lockNamePrefix + job
	if len(name) > lock.MaxNameLen || !utf8.ValidString(name) {
		return opts
	}
	return append([]lock.LockOption{lock.WithName(name)}, opts...)
}
