package httplock

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

// IdempotencyOption configures the Idempotency-Key middleware made by
// [NewIdempotency] or [Idempotent].
type IdempotencyOption func(*idempotencyConfig)

// Defaults of the Idempotency-Key middleware.
const (
	// DefaultRetention is how long a stored answer is kept (its TTL).
	DefaultRetention = 24 * time.Hour
	// DefaultMaxAnswerBody is the largest answer body that is stored.
	DefaultMaxAnswerBody = 64 << 10
	// DefaultMaxRequestBody is the largest request body accepted.
	DefaultMaxRequestBody = 1 << 20
	// DefaultKeyPrefix starts every Redis key the middleware writes.
	DefaultKeyPrefix = "idempotency:"
	// DefaultStoreTimeout bounds each attempt to write an answer to Redis.
	DefaultStoreTimeout = 2 * time.Second
)

type idempotencyConfig struct {
	keyRequired    bool
	retention      time.Duration
	maxAnswerBody  int
	maxRequestBody int64
	storedStatus   func(int) bool
	storedHeaders  []string // canonical names
	scope          func(*http.Request) string
	prefix         string
	acquireTimeout time.Duration
	retryAfter     time.Duration
	storeTimeout   time.Duration
	lockOpts       []lock.LockOption
	logger         *slog.Logger
	outcome        func(context.Context, string)
	problems       []string // options given invalid values
}

// WithKeyRequired answers 400 Bad Request (outcome "missing-key") to a
// request without an Idempotency-Key header. Default: such a request
// passes to the handler as it is, without idempotency (outcome "bypass").
func WithKeyRequired() IdempotencyOption {
	return func(c *idempotencyConfig) { c.keyRequired = true }
}

// WithRetention sets how long a stored answer is replayed: the TTL (Redis
// PX) of every stored answer, so the store's memory stays bounded. d must
// be at least 1 ms. Default [DefaultRetention] (24 h).
func WithRetention(d time.Duration) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.retention = d
		if d < time.Millisecond {
			c.problem(fmt.Sprintf("WithRetention(%v): want at least 1ms", d))
		}
	}
}

// WithMaxAnswerBody sets the largest answer body, in bytes, that is
// stored: the answer is held back until the handler returns as long as it
// is no larger; a handler writing more is streamed to the client from
// then on and its answer is not stored (outcome "not-stored"). n must be
// positive. Default [DefaultMaxAnswerBody] (64 KiB).
func WithMaxAnswerBody(n int) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.maxAnswerBody = n
		if n <= 0 {
			c.problem(fmt.Sprintf("WithMaxAnswerBody(%d): want a positive size", n))
		}
	}
}

// WithMaxRequestBody sets the largest request body, in bytes, that the
// middleware reads for the request's fingerprint; a larger body is
// answered 413 Content Too Large (outcome "too-large") without running
// the handler. n must not be negative (0: only empty bodies). Default
// [DefaultMaxRequestBody] (1 MiB).
func WithMaxRequestBody(n int64) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.maxRequestBody = n
		if n < 0 {
			c.problem(fmt.Sprintf("WithMaxRequestBody(%d): want a size of 0 or more", n))
		}
	}
}

// WithStoredStatus sets which answer statuses are stored and replayed:
// those for which fn returns true, except 5xx, which are never stored (the
// draft leaves a failed request to be retried). fn must not be nil.
// Default: 2xx and 4xx except 409 Conflict and 429 Too Many Requests.
func WithStoredStatus(fn func(status int) bool) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.storedStatus = fn
		if fn == nil {
			c.problem("WithStoredStatus(nil)")
		}
	}
}

// defaultStoredStatus is the status filter without WithStoredStatus.
func defaultStoredStatus(status int) bool {
	return 200 <= status && status < 300 ||
		400 <= status && status < 500 && status != http.StatusConflict && status != http.StatusTooManyRequests
}

// WithStoredHeaders sets the answer headers that are stored and replayed
// (names are case-insensitive); the others are sent with the first answer
// only. Names must be valid header field names. Default Content-Type,
// Content-Encoding, Content-Language and Location.
func WithStoredHeaders(names ...string) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.storedHeaders = c.storedHeaders[:0]
		for _, n := range names {
			if !validHeaderName(n) {
				c.problem(fmt.Sprintf("WithStoredHeaders: %q is no header field name", n))
				continue
			}
			if cn := http.CanonicalHeaderKey(n); !slices.Contains(c.storedHeaders, cn) {
				c.storedHeaders = append(c.storedHeaders, cn)
			}
		}
	}
}

// WithScope sets the scope of the keys: fn returns, for a request, who
// the key belongs to (the authenticated user or tenant, set by an earlier
// middleware), so that two users sending the same Idempotency-Key never
// share an answer. A request for which fn returns "" is answered 400 Bad
// Request (outcome "missing-scope"). fn runs before any Redis call and
// must not be nil. Default: no scope (method and route only).
func WithScope(fn func(*http.Request) string) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.scope = fn
		if fn == nil {
			c.problem("WithScope(nil)")
		}
	}
}

// WithKeyPrefix sets the start of every Redis key the middleware writes:
// answers are kept under p+"answer:"+..., run locks are taken on
// p+"run:"+.... p must not be empty. Default [DefaultKeyPrefix].
func WithKeyPrefix(p string) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.prefix = p
		if p == "" {
			c.problem(`WithKeyPrefix(""): want a prefix`)
		}
	}
}

// WithIdempotencyAcquireTimeout is [WithAcquireTimeout] for the
// Idempotency-Key middleware: it bounds the whole work before the handler
// runs, together: the read of a stored answer, the acquisition of the run
// lock and the read once it is held, Redis calls included (the request's
// deadline, when sooner, bounds it instead). A Redis that does not answer
// within d gets the request 503 Service Unavailable. d must be positive.
// Default [DefaultAcquireTimeout] (1 s).
func WithIdempotencyAcquireTimeout(d time.Duration) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.acquireTimeout = d
		if d <= 0 {
			c.problem(fmt.Sprintf("WithIdempotencyAcquireTimeout(%v): want a positive timeout", d))
		}
	}
}

// WithIdempotencyRetryAfter is [WithRetryAfter] for the Idempotency-Key
// middleware: the hint of the Retry-After header (whole seconds, rounded
// up, at least 1) of its 409 and 503 answers; a 409 never hints later
// than the running request's remaining lease. d must be positive.
// Default [DefaultRetryAfter] (1 s).
func WithIdempotencyRetryAfter(d time.Duration) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.retryAfter = d
		if d <= 0 {
			c.problem(fmt.Sprintf("WithIdempotencyRetryAfter(%v): want a positive hint", d))
		}
	}
}

// WithIdempotencyLockOptions is [WithLockOptions] for the Idempotency-Key
// middleware: opts go to every acquisition of a run lock, such as
// [lock.WithLease]. The middleware adds [lock.WithHoldUntilUnlock] and
// [lock.WithMaxWait] (what is left of the acquire timeout), and names the lock
// "idempotency" for telemetry unless opts name it.
func WithIdempotencyLockOptions(opts ...lock.LockOption) IdempotencyOption {
	return func(c *idempotencyConfig) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithStoreTimeout bounds each attempt to store an answer in Redis, and
// so how long the client waits for the handler's answer after the
// handler returned: when the first attempt fails or times out (outcome
// "store-failed"), the answer is sent at once, and the run keeps its run
// lock and tries again, each attempt bounded by d and begun 100 ms after
// the one before ended and no sooner than d after it began, until Redis
// takes the answer or refuses it, the hold ends (the lease lost because
// Redis stayed away past its validity, or the lock Client closed), or
// the answer's retention has passed since the first attempt (an answer
// stored then would have expired); only then is the lock released. Meanwhile a retry of the
// request is answered 409 (503 while Redis does not answer). Not retried:
// an error reply of Redis that does not pass by itself (out of memory, a
// key of another type; loading, read-only, busy and cluster-down replies
// are retried), a closed go-redis client, and a Locker whose holds
// [lock.Held] does not know: their run lock is released after the first
// attempt. d must be positive. Default [DefaultStoreTimeout] (2 s).
func WithStoreTimeout(d time.Duration) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.storeTimeout = d
		if d <= 0 {
			c.problem(fmt.Sprintf("WithStoreTimeout(%v): want a positive timeout", d))
		}
	}
}

// WithLogger sets the logger of answers not stored and failed stores
// (level Warn), of answers stored after a failed first attempt (level
// Info), and of Redis failures and bodies read before the middleware
// (level Error). Records name the
// method, the route and a digest of the key, never the raw key, the scope
// or a body. l must not be nil. Default [slog.Default] at each record.
func WithLogger(l *slog.Logger) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.logger = l
		if l == nil {
			c.problem("WithLogger(nil)")
		}
	}
}

// WithOutcome makes fn hear, for every request the middleware serves,
// what became of it, with the request's context (where the request's
// span is): "ran" (the handler ran and its answer is stored),
// "not-stored" (ran, answer not storable: status filter, too large,
// flushed, hijacked, a 5xx status set after the header, lease lost, or a
// newer answer stored), "store-failed" (ran, the first attempt to store
// the answer failed or timed out: it was sent without waiting for Redis
// further, and its store is retried while the run lock holds, see
// [WithStoreTimeout]),
// "replayed", "conflict" (409), "mismatch" (422), "missing-key",
// "invalid-key", "missing-scope", "unreadable-body" (400), "too-large"
// (413), "consumed-body" (500: an earlier middleware read the body),
// "unavailable" (503), "client-gone" (the client went away before the
// handler could run) and "bypass" (no key, not required). fn runs on
// the request's goroutine and must not be nil;
// [github.com/lockkit/lockkit/otellock.IdempotencyOutcome] fits it.
func WithOutcome(fn func(ctx context.Context, outcome string)) IdempotencyOption {
	return func(c *idempotencyConfig) {
		c.outcome = fn
		if fn == nil {
			c.problem("WithOutcome(nil)")
		}
	}
}

func (c *idempotencyConfig) problem(p string) { c.problems = append(c.problems, p) }

// newIdempotencyConfig applies opts over the defaults and checks them.
func newIdempotencyConfig(opts []IdempotencyOption) (idempotencyConfig, error) {
	c := idempotencyConfig{
		retention:      DefaultRetention,
		maxAnswerBody:  DefaultMaxAnswerBody,
		maxRequestBody: DefaultMaxRequestBody,
		storedStatus:   defaultStoredStatus,
		storedHeaders:  []string{"Content-Type", "Content-Encoding", "Content-Language", "Location"},
		prefix:         DefaultKeyPrefix,
		acquireTimeout: DefaultAcquireTimeout,
		retryAfter:     DefaultRetryAfter,
		storeTimeout:   DefaultStoreTimeout,
		outcome:        func(context.Context, string) {},
	}
	if err := httpkit.Apply(&c, opts); err != nil {
		c.problem(err.Error())
	}
	if len(c.problems) > 0 {
		return c, fmt.Errorf("%w: %s", lock.ErrInvalid, c.problems[0])
	}
	if err := (lock.Integration{}).CheckLockOptions(c.lockOpts...); err != nil {
		return c, fmt.Errorf("WithIdempotencyLockOptions: %w", err)
	}
	c.lockOpts = append([]lock.LockOption{lock.WithName("idempotency")}, c.lockOpts...)
	c.lockOpts = append(c.lockOpts, lock.WithHoldUntilUnlock(), lock.WithMaxWait(c.acquireTimeout))
	return c, nil
}

// validHeaderName reports whether s is an RFC 9110 field name: a token,
// visible ASCII without delimiters.
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, b) >= 0 {
			return false
		}
	}
	return s != ""
}
