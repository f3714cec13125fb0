package lock

import (
	"log/slog"
	"strings"
	"time"
)

const (
	// DefaultLease is the lease a lock gets when neither [WithDefaultLease]
	// nor a [LockOption] sets one. The watchdog renews it every third of it.
	DefaultLease = 30 * time.Second

	// MinLease is the shortest lease accepted: below it the drift allowance
	// and one round trip leave no time to renew.
	MinLease = 20 * time.Millisecond

	// MaxKeyLen is the longest key accepted, in bytes. Keys longer than 128
	// bytes are stored under a SHA-256 digest, so Redis key size stays
	// bounded whatever the key.
	MaxKeyLen = 64 << 10

	// DefaultPrefix starts every Redis key and channel a Client uses.
	DefaultPrefix = "lockkit"

	// releaseTimeout bounds how long an unlock whose context has no
	// deadline waits for Redis; the release runs without the caller's
	// cancellation, so that a cancelled request still releases.
	releaseTimeout = time.Second

	// unlockGrace is how long past its context's deadline an unlock waits
	// for Redis to confirm the release.
	unlockGrace = 50 * time.Millisecond

	// leaveWait is how long a Lock that stops waiting waits for Redis to
	// take it out of the wait queue; it goes on in the background after.
	leaveWait = 50 * time.Millisecond

	// closeTimeout bounds Close, which promises to return within 1 s: it
	// waits for Redis to confirm the releases for at most half of it, and
	// for the Client's goroutines until it ends.
	closeTimeout = 800 * time.Millisecond
)

// Option configures a [Client]; pass options to [New].
type Option func(*config)

type config struct {
	lease       time.Duration
	prefix      string
	observer    Observer
	drift       time.Duration // 0: 1% of the lease + 2 ms
	nodeTimeout time.Duration // 0: lease/20 within [10 ms, 1 s]
	acks        int           // replicas that must confirm each write; 0: none
	ackTimeout  time.Duration
	label       string // WithOwnerLabel
	logger      *slog.Logger
	bad         []error // from options given impossible values
}

// WithDefaultLease sets the lease of locks that do not choose one with
// [WithLease] or [WithFixedLease]. Default [DefaultLease] (30 s); at least
// [MinLease].
func WithDefaultLease(d time.Duration) Option { return func(c *config) { c.lease = d } }

// WithPrefix sets the namespace that starts every Redis key and channel
// the Client uses, so that applications sharing a Redis keep apart. Default
// [DefaultPrefix]. It must not be empty nor contain '{' or '}'. Clients
// that should exclude each other must use the same prefix.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithObserver makes the Client report what it does to o, for tracing and
// metrics (see package otellock). Default: no observer.
func WithObserver(o Observer) Option { return func(c *config) { c.observer = o } }

// WithLogger sets the logger of what the Client tells the operator rather
// than a caller: today one Warn at [New] when Redis's maxmemory-policy may
// evict lock keys (see [New]). Default [slog.Default]. It must not be nil;
// use slog.New(slog.DiscardHandler) for no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		c.logger = l
		if l == nil {
			c.bad = append(c.bad, invalidf("nil logger"))
		}
	}
}

// WithDrift sets the clock drift allowance: how much shorter than a lease
// the holder assumes its validity to be, to cover clock rate differences
// between the Client and Redis. Default 1% of the lease + 2 ms, as in the
// Redlock spec. It must be positive and leave at least half of every
// lease.
func WithDrift(d time.Duration) Option {
	return func(c *config) {
		c.drift = d
		if d <= 0 {
			c.bad = append(c.bad, invalidf("drift allowance %v must be positive", d))
		}
	}
}

// WithNodeTimeout bounds each node's answer in quorum mode ([NewQuorum]): a
// node silent for longer counts as failed for that call. Default 1/20 of
// the lock's lease, at least 10 ms and at most 1 s. It must be positive.
// A single-node Client relies on go-redis's own timeouts instead.
func WithNodeTimeout(d time.Duration) Option {
	return func(c *config) {
		c.nodeTimeout = d
		if d <= 0 {
			c.bad = append(c.bad, invalidf("node timeout %v must be positive", d))
		}
	}
}

// WithReplicaAck makes every write of a lock wait, with Redis's WAIT, until
// at least replicas replicas of the master confirm it, for up to timeout,
// so that a failover to one of them keeps the lock and its fencing token
// (as Redisson checks synced replicas). An acquisition whose write is not
// confirmed in time fails with an error matching [ErrReplicaAck] (what it
// took is released), a renewal that is not counts as failed (the hold is
// lost when its validity ends without one), and a waiter the key is handed
// to confirms with a command of its own before it starts. Every
// acquisition and renewal then also waits for the replication round trip.
// replicas must be at least 1 and timeout at least 1 ms; a [*redis.ClusterClient]
// is refused (WAIT would reach one node of the cluster, not the key's).
// Default: no acknowledgement (replication is asynchronous).
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		c.acks, c.ackTimeout = replicas, timeout
		if replicas < 1 || timeout < time.Millisecond {
			c.bad = append(c.bad, invalidf("replica acknowledgement of %d replicas within %v: want at least 1 replica and a timeout of 1 ms or more", replicas, timeout))
		}
	}
}

func (c *config) validate() error {
	if err := checkLease(c.lease); err != nil {
		return err
	}
	if len(c.bad) > 0 {
		return c.bad[0]
	}
	if d := c.driftFor(c.lease); d >= c.lease/2 {
		return invalidf("lease %v is too short for the drift allowance %v", c.lease, d)
	}
	if c.prefix == "" || strings.ContainsAny(c.prefix, "{}") {
		return invalidf("prefix %q must be non-empty and contain no '{' or '}'", c.prefix)
	}
	return nil
}

// LockOption configures one [Client.Lock] or [Client.TryLock] call.
type LockOption func(*lockConfig)

type lockConfig struct {
	lease       time.Duration
	fixed       bool
	maxWait     time.Duration // 0: wait until ctx is done
	waitSet     bool
	untilUnlock bool
	name        string // WithName
	nameSet     bool
	internal    bool // Integration.Internal
	kind        shareKind
	limit       int // a semaphore's
}

// WithLease sets the lease of this lock: Redis keeps the key at most this
// long after the last renewal, so a crashed holder frees it within d. The
// watchdog renews the lease every d/3 while the lock is held. At least
// [MinLease]; default the Client's (see [WithDefaultLease]).
func WithLease(d time.Duration) LockOption {
	return func(c *lockConfig) { c.lease, c.fixed = d, false }
}

// WithFixedLease holds the lock for at most d with no watchdog: the key
// expires d after it was taken unless unlocked before. The lock context is
// cancelled with cause [ErrLost] when the lease's validity ends. At least
// [MinLease].
func WithFixedLease(d time.Duration) LockOption {
	return func(c *lockConfig) { c.lease, c.fixed = d, true }
}

// WithMaxWait limits how long [Client.Lock] takes, measured from the call,
// Redis calls included: after d it returns [ErrNotObtained], joined with
// [context.DeadlineExceeded] when a Redis call was still unanswered (a
// stalled or unreachable Redis) rather than the key held: the first
// attempt, or a later retry unanswered for 100 ms or more. For
// [Client.TryLock] it bounds the one attempt the same way. It must be
// positive. Default: no limit but the context's (and, for each Redis
// call, the Redis client's timeouts).
func WithMaxWait(d time.Duration) LockOption {
	return func(c *lockConfig) { c.maxWait, c.waitSet = d, true }
}

// WithHoldUntilUnlock keeps the lock held, and its lease renewed, until its
// [UnlockFunc] is called, the lease is lost or the Client is closed, even
// after the context passed to Lock is done. The returned context still
// ends when that context does (with its cause), so the work hears of the
// cancellation, and with cause [ErrLost] if the lease is lost; [Held] and
// [FencingToken] report the hold until it ends.
//
// Use it for work that must finish under the lock whatever the caller
// does: package ginlock holds a route's lock this way past a client
// disconnect. Always defer the unlock: without one, the watchdog keeps the
// key until Close. On re-entry it changes nothing (the outermost
// acquisition decides).
func WithHoldUntilUnlock() LockOption {
	return func(c *lockConfig) { c.untilUnlock = true }
}

// lockConfig applies opts over the Client's defaults and validates them.
func (c *config) lockConfig(opts []LockOption) (lockConfig, error) {
	lc := lockConfig{lease: c.lease}
	if len(opts) > 0 { // options get a copy, so that lc stays on the stack without them
		set := lc
		for _, o := range opts {
			if o == nil {
				return lc, invalidf("nil lock option")
			}
			o(&set)
		}
		lc = set
	}
	return lc, lc.validate(c.driftFor(lc.lease))
}

func checkLease(d time.Duration) error {
	if d < MinLease {
		return invalidf("lease %v is shorter than the minimum %v", d, MinLease)
	}
	return nil
}

func (c *lockConfig) validate(drift time.Duration) error {
	if err := checkLease(c.lease); err != nil {
		return err
	}
	if drift >= c.lease/2 {
		return invalidf("lease %v is too short for the drift allowance %v", c.lease, drift)
	}
	if c.waitSet && c.maxWait <= 0 {
		return invalidf("wait limit %v must be positive", c.maxWait)
	}
	return c.checkName()
}

func checkKey(key string) error {
	switch {
	case key == "":
		return invalidf("empty key")
	case len(key) > MaxKeyLen:
		return invalidf("key of %d bytes is longer than the maximum %d", len(key), MaxKeyLen)
	}
	return nil
}

// drift is the allowance subtracted from a lease to get its validity.
func (c *config) driftFor(lease time.Duration) time.Duration {
	if c.drift > 0 {
		return c.drift
	}
	return lease/100 + 2*time.Millisecond
}

// nodeTimeoutFor bounds one node's answer in quorum mode (see
// [WithNodeTimeout]).
func (c *config) nodeTimeoutFor(lease time.Duration) time.Duration {
	if c.nodeTimeout > 0 {
		return c.nodeTimeout
	}
	return min(max(lease/20, 10*time.Millisecond), time.Second)
}
