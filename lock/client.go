package lock

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/janitor"
	"github.com/lockkit/lockkit/lock/internal/tasks"
)

// Locker is what packages ginlock, cronlock and otellock accept. [*Client]
// implements it.
type Locker interface {
	Lock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error)
	TryLock(ctx context.Context, key string, opts ...LockOption) (context.Context, UnlockFunc, error)
}

// UnlockFunc releases one hold level. It is safe to call from any
// goroutine and with a cancelled context around: the Redis call runs
// without the caller's cancellation, bounded by a timeout of its own.
//
// It returns nil when Redis confirmed the release, [ErrNotHeld] when it was
// already called (Redis is not touched again; while that call, or the
// unlock of a level this one was entered through, is still under way, it
// returns when that one does), [ErrLost] when the lease had
// been lost before, [ErrClosed] when [Client.Close] ended the hold (also
// while this unlock's release was on its way: Close cuts an unlock still
// waiting for Redis, and what the release owes Redis goes on in the
// background), or the Redis error (the lease then lapses by itself).
// Afterwards the level's lock context is cancelled with a cause that
// matches [ErrNotHeld] ([ErrLost] if the lease was lost first, [ErrClosed]
// if Close ended the hold or cut the unlock), never plain
// [context.Canceled], which means the caller's own context ended while the
// lock was still held. Check [context.Cause] to tell the two apart.
type UnlockFunc func() error

// Client takes locks on one Redis deployment. It is safe for concurrent
// use. Create it with [New] and call [Client.Close] when done.
type Client struct {
	be  backend // where the locks are kept: New's single, NewQuorum's quorum
	cfg config
	id  string // random, then host, pid and label (see clientID); every owner is id:seq
	seq atomic.Uint64

	// The default lease and its linger time (see newHold) in ms, boxed
	// once for script calls.
	leaseArg, lingerArg any
	keys                *keyCache

	// The contexts Close ends, by their cancel functions: of the Lock and
	// TryLock calls under way (see callContext), and of the unlocks
	// waiting for Redis (see cutAtClose).
	callsMu     sync.Mutex
	calls       map[context.Context]context.CancelCauseFunc
	unlocks     map[context.Context]context.CancelFunc
	callsClosed bool

	life      context.Context // cancelled by Close
	stop      context.CancelFunc
	closeOnce sync.Once
	closed    chan struct{} // closed when Close returns
	closeBy   time.Time     // when Close returns at the latest; set before life ends
	tasks     *tasks.Runner // the Client's goroutines
	wd        *watchdog
	wt        *waiters
	jan       *janitor.Janitor[*hold]
}

var _ Locker = (*Client)(nil)

// New returns a Client that takes locks on rdb: a [*redis.Client] (also
// one from [redis.NewFailoverClient], for Sentinel), a [*redis.ClusterClient]
// (sharded pub/sub is used for wake-ups) or any other
// [redis.UniversalClient] whose commands reach one Redis deployment. A
// [*redis.Ring] is refused: it spreads keys over servers by a hash of the
// ring's current members, so a member joining or leaving moves a held lock
// to a server where another owner can take it. The Client does not own
// rdb: Close leaves it open.
//
// Defaults: lease [DefaultLease] (30 s) renewed by the watchdog every 10 s,
// key prefix [DefaultPrefix], drift allowance 1% of the lease + 2 ms, no
// observer, owners naming the host and process id but no label (see
// [WithOwnerLabel]), logging to [slog.Default]. It returns an error
// wrapping [ErrInvalid] for a nil rdb, a Ring or a bad option.
//
// New makes one Redis call, CONFIG GET maxmemory*, waiting for its answer
// at most 50 ms (the rest, up to 1 s, goes on in the background), and logs
// one Warn (see [WithLogger]) naming the policy when
// maxmemory-policy is not noeviction: every other policy may evict lock
// keys (volatile-* evicts exactly the keys with a TTL, held locks among
// them), and an evicted lock is taken by another owner before its holder
// learns of it at its next renewal. Where CONFIG GET is refused (managed
// Redis often renames it) or unanswered, New logs at Debug and goes on.
//
// New starts the watchdog, the janitor (which cleans up after calls cut
// short) and a subscriber of pub/sub channels: three goroutines, which end
// at Close.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if err := checkRedis(rdb); err != nil {
		return nil, err
	}
	return newClient([]redis.UniversalClient{rdb}, opts, newSingle)
}

// checkRedis refuses a Redis client a lock cannot live on.
func checkRedis(rdb redis.UniversalClient) error {
	if isNil(rdb) {
		return invalidf("nil Redis client")
	}
	if _, ok := rdb.(*redis.Ring); ok {
		return invalidf("a redis.Ring cannot hold locks: a change of its members moves keys between servers (use a Redis Cluster, or NewQuorum over independent servers)")
	}
	return nil
}

// newClient makes a Client on the nodes of rdbs, kept by the backend
// newBackend makes.
func newClient(rdbs []redis.UniversalClient, opts []Option, newBackend func(*Client, []*node) backend) (*Client, error) {
	cfg := config{lease: DefaultLease, prefix: DefaultPrefix, logger: slog.Default()}
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("lock: owner id: %w", err)
	}
	c := &Client{cfg: cfg, id: clientID(id, hostName(), cfg.label)}
	nodes := make([]*node, len(rdbs))
	for i, rdb := range rdbs {
		nd, err := newNode(rdb, cfg)
		if err != nil {
			return nil, err
		}
		nodes[i] = nd
	}
	c.leaseArg, c.lingerArg = leaseArgs(cfg.lease)
	c.keys = newKeyCache(cfg.prefix)
	c.tasks = tasks.New()
	c.life, c.stop = context.WithCancel(cfg.background())
	c.calls = make(map[context.Context]context.CancelCauseFunc)
	c.unlocks = make(map[context.Context]context.CancelFunc)
	c.be = newBackend(c, nodes)
	c.closed = make(chan struct{})
	c.wd = newWatchdog(c)
	c.wt = newWaiters(c)
	c.jan = janitor.New(c.life, c.clean, func() time.Time { return c.closeBy }, c.callsUnderWay)
	c.tasks.Run(c.wd.run)
	c.tasks.Run(c.jan.Run)
	for _, s := range c.wt.subs {
		c.tasks.Run(s.Run)
	}
	c.startEvictionCheck()
	return c, nil
}

func isNil(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return r == nil
	case *redis.ClusterClient:
		return r == nil
	case *redis.Ring:
		return r == nil
	}
	return false
}

// Close ends every lock still held: its context is cancelled with cause
// [ErrClosed], its lease is no longer renewed, and Close releases its key
// in Redis, best effort (a key Redis did not confirm releasing lapses within
// its lease). It wakes every waiting Lock with ErrClosed and takes it out
// of the key's wait queue in Redis before it returns (if Redis answers in
// time), so that no release hands a key to a closed Client, has the waiters
// of other Clients check the keys it handed over in the last claim window
// (1 s), which it can no longer check itself, and stops the Client's
// goroutines.
//
// Close returns within 1 s whatever Redis does: a Redis call still under
// way then ends in the background when the Redis client gives up (its read
// timeout; close rdb to end it at once). An [UnlockFunc] of a lock Close
// ended returns ErrClosed and makes no Redis call. Later calls of Lock,
// TryLock and Close return ErrClosed; a Close called while another runs
// waits for it.
func (c *Client) Close() error {
	first := false
	c.closeOnce.Do(func() { first = true })
	if !first {
		<-c.closed
		return ErrClosed
	}
	defer close(c.closed)
	deadline := time.Now().Add(closeTimeout)
	c.closeBy = deadline
	c.stop()
	c.closeCalls()
	holds := c.wd.closeAll()
	c.releaseAll(holds, deadline.Add(-closeTimeout/2))
	c.handOverChecks(c.wt.close(), deadline.Add(-closeTimeout/4))
	c.tasks.Close(time.Until(deadline))
	return nil
}

// releaseAll releases the keys of holds in Redis, one pipeline per node,
// waiting for the answers until deadline.
func (c *Client) releaseAll(holds []*hold, deadline time.Time) {
	if len(holds) == 0 {
		return
	}
	c.onEveryNode(deadline, func(ctx context.Context, nd *node) { nd.releaseAll(ctx, holds) })
}

// onEveryNode runs f on every node under the Client's background context
// (its values, not its end, which Close has brought) bounded by deadline,
// and returns when all are done or the deadline passed (see fanOut): the
// last writes of Close.
func (c *Client) onEveryNode(deadline time.Time, f func(context.Context, *node)) {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(c.life), deadline)
	defer cancel()
	fanOut(c.be.nodes(), ctx, 0, func(ctx context.Context, nd *node) (struct{}, error) {
		f(ctx, nd)
		return struct{}{}, nil
	}, nil)
}

func (c *Client) isClosed() bool { return c.life.Err() != nil }

func (c *Client) newOwner(internal bool) string {
	var buf [80]byte // owners are at most 63 bytes (see clientID): one allocation, the string
	b := append(append(buf[:0], c.id...), ':')
	if internal {
		b = append(b, internalMark) // see Owner.Internal
	}
	return string(strconv.AppendUint(b, c.seq.Add(1), 36))
}

// ownedBy reports whether owner o is one of c's ("<client id>:<seq>").
func (c *Client) ownedBy(o string) bool {
	return len(o) > len(c.id) && o[len(c.id)] == ':' && strings.HasPrefix(o, c.id)
}
