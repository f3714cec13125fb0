package lock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// evictionCheckTimeout bounds the question about Redis's eviction
	// policy that New asks (see checkEviction).
	evictionCheckTimeout = time.Second

	// evictionCheckWait is how long New waits for that answer before it
	// returns; the check goes on in the background after.
	evictionCheckWait = 50 * time.Millisecond
)

// noEviction is the one maxmemory-policy that never removes lock keys.
const noEviction = "noeviction"

// checkEviction asks every node for its maxmemory-policy, notes it for the
// out-of-memory error (see node.redisError), and logs one Warn per node
// whose policy may evict keys: lock keys carry a TTL, so volatile-*
// policies evict exactly the held locks, and allkeys-* may evict them too;
// an evicted lock is taken by another owner before its holder is told (at
// its next renewal). Where CONFIG GET is refused (managed Redis) or
// unanswered in evictionCheckTimeout, it logs at Debug and goes on. It
// runs as one of the Client's goroutines, which New waits for up to
// evictionCheckWait: a stalled Redis must not hold New up.
func (c *Client) startEvictionCheck() {
	checked := make(chan struct{})
	if !c.tasks.Run(func() {
		defer close(checked)
		c.checkEviction()
	}) {
		return
	}
	t := time.NewTimer(evictionCheckWait)
	defer t.Stop()
	select {
	case <-checked:
	case <-t.C:
	}
}

func (c *Client) checkEviction() {
	ctx, cancel := context.WithTimeout(c.life, evictionCheckTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, nd := range c.be.nodes().nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd.checkEviction(ctx, c.cfg.logger)
		}()
	}
	wg.Wait()
}

func (nd *node) checkEviction(ctx context.Context, log *slog.Logger) {
	addr := slog.String("redis", nodeAddr(nd.rdb))
	policy, maxmemory, err := maxmemoryPolicy(ctx, nd.rdb)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelDebug, "lock: could not read Redis's maxmemory-policy, so whether it may evict lock keys is unknown", addr, slog.Any("error", err))
		return
	}
	nd.policy.Store(&policy)
	if policy == noEviction {
		return
	}
	log.LogAttrs(ctx, slog.LevelWarn,
		"lock: Redis's maxmemory-policy may evict lock keys: an evicted lock is taken by another owner before its holder is told; set maxmemory-policy noeviction on the Redis that holds locks",
		addr, slog.String("maxmemory_policy", policy), slog.String("maxmemory", maxmemory))
}

// maxmemoryPolicy reads maxmemory-policy and maxmemory with one CONFIG GET
// (a pattern, which every Redis version takes). On Redis Cluster it asks
// every master, and reports the first policy that is not noeviction.
func maxmemoryPolicy(ctx context.Context, rdb redis.UniversalClient) (policy, maxmemory string, err error) {
	get := func(ctx context.Context, r redis.Cmdable) (string, string, error) {
		m, err := r.ConfigGet(ctx, "maxmemory*").Result()
		if err == nil && m["maxmemory-policy"] == "" {
			err = fmt.Errorf("no maxmemory-policy in %v", m)
		}
		return m["maxmemory-policy"], m["maxmemory"], err
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return get(ctx, rdb)
	}
	var mu sync.Mutex
	policy = noEviction
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		p, mm, err := get(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		if err == nil && p != noEviction && policy == noEviction {
			policy, maxmemory = p, mm
		}
		return err
	})
	return policy, maxmemory, err
}
