package lock

import "unicode/utf8"

// MaxNameLen is the longest name [WithName] accepts, in bytes.
const MaxNameLen = 255

// WithName gives the lock a name for telemetry: observers (see
// [Observer]) record it instead of deriving one from the key. A name
// stands for a kind of lock, not for one key: use a constant, such as the
// key template "orders:{id}" (as package ginlock does) or a job's name (as
// package cronlock does), so that metrics get one series per kind of lock
// rather than per order or user. It must be valid UTF-8, 1 to
// [MaxNameLen] bytes. Default: none; package otellock then derives the
// name from the key. On re-entry it names the re-entry only.
func WithName(name string) LockOption {
	return func(c *lockConfig) { c.name, c.nameSet = name, true }
}

// checkName reports a name given with WithName that is empty, too long or
// not UTF-8.
func (c *lockConfig) checkName() error {
	switch {
	case !c.nameSet:
		return nil
	case c.name == "" || len(c.name) > MaxNameLen:
		return invalidf("lock name of %d bytes: want 1 to %d", len(c.name), MaxNameLen)
	case !utf8.ValidString(c.name):
		return invalidf("lock name %q is not valid UTF-8", c.name)
	}
	return nil
}
