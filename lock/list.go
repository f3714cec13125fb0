package lock

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock/internal/glob"
	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// scanCount is the COUNT hint of each SCAN step of List.
const scanCount = 500

// tagUnescaper undoes tagEscaper.
var tagUnescaper = strings.NewReplacer("%25", "%", "%7B", "{", "%7D", "}")

// List lists the locks whose key matches pattern (a glob as in Redis's
// SCAN: '*', '?', [abc], '\' escapes) that are held or kept for a queued
// waiter's turn, and the semaphores and read-write locks that have a
// holder, in no set order, each read as by [Client.Inspect]. It
// scans with SCAN, never KEYS: on a Redis Cluster every master, in quorum
// mode every node (each lock is then listed once per node that has it,
// with Node set). Locks taken or released while the scan runs may or may
// not be listed. Keys longer than 128 bytes once escaped are stored by
// their digest: only a pattern made of '*'s, such as "*", lists them (their
// keys are not stored, so no other pattern can tell), with Key empty; [Client.Inspect] and [Client.ForceUnlock] take their Name.
//
// The pattern matches the keys as given to [Client.Lock], byte by byte:
// "a?" lists "a%" and "a{" although Redis stores them escaped.
//
// An error wrapping [ErrInvalid] for an empty, oversized or malformed
// pattern (a '[' without its ']', a trailing '\', a class ending in
// '-'), or [ErrClosed] after Close, is yielded alone. A Redis server (a
// node in quorum mode, a master of a Cluster) that fails or does not
// answer does not hide the others' locks: the scan goes on with the next
// server, and the failures are yielded, joined, as the last element,
// after everything the others hold was listed. Every Redis call returns
// within ctx's deadline.
func (c *Client) List(ctx context.Context, pattern string) iter.Seq2[LockInfo, error] {
	return func(yield func(LockInfo, error) bool) {
		if err := checkPattern(pattern); err != nil {
			yield(LockInfo{}, err)
			return
		}
		match := glob.ScanMatch(c.cfg.prefix, pattern, tagEscaper)
		keep := func(key string) bool {
			if key == "" { // stored by its digest: only a pattern of '*'s surely matches
				return strings.Trim(pattern, "*") == ""
			}
			return glob.Match(pattern, key)
		}
		// Every node's servers first: a lock is named by its server (Node)
		// when more than one server may hold it, a node that failed
		// counting as one.
		nodes := c.be.nodes().nodes
		servers := make([][]*redis.Client, len(nodes))
		failed := make([]error, len(nodes))
		spread := 0
		for i, nd := range nodes {
			servers[i], failed[i] = c.servers(ctx, nd)
			spread += max(len(servers[i]), 1)
		}
		var errs []error
		for i, nd := range nodes {
			if failed[i] != nil {
				errs = append(errs, fmt.Errorf("lock: list %q: %s: %w", pattern, nodeAddr(nd.rdb), redisError(failed[i])))
				continue
			}
			for _, srv := range servers[i] {
				ok, err := c.scan(ctx, srv, match, keep, spread > 1, yield)
				if !ok {
					return
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
		}
		if len(errs) > 0 {
			yield(LockInfo{}, errors.Join(errs...))
		}
	}
}

// checkPattern refuses, with an error wrapping ErrInvalid, a pattern that
// List cannot scan: empty, longer than MaxKeyLen or malformed (see
// glob.Check).
func checkPattern(pattern string) error {
	switch {
	case pattern == "":
		return invalidf("empty pattern (use \"*\" for every key)")
	case len(pattern) > MaxKeyLen:
		return invalidf("pattern of %d bytes is longer than the maximum %d", len(pattern), MaxKeyLen)
	}
	if err := glob.Check(pattern); err != nil {
		return invalidf("%s", err)
	}
	return nil
}

// servers returns the Redis servers that hold nd's keys: the masters of a
// Redis Cluster, or nd's one server.
func (c *Client) servers(ctx context.Context, nd *node) ([]*redis.Client, error) {
	cc, ok := nd.rdb.(*redis.ClusterClient)
	if !ok {
		if r, ok := nd.rdb.(*redis.Client); ok {
			return []*redis.Client{r}, nil
		}
		return nil, invalidf("cannot scan a %T", nd.rdb)
	}
	var mu sync.Mutex
	var masters []*redis.Client
	err := c.within(ctx, func(ctx context.Context) error {
		return cc.ForEachMaster(ctx, func(_ context.Context, m *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			masters = append(masters, m)
			return nil
		})
	})
	mu.Lock()
	defer mu.Unlock()
	return masters, err
}

// scan yields the held locks of one server whose hash matches match and
// whose key keep keeps; it reports whether to go on (false when yield
// said to stop), and the error that ended the scan of srv.
func (c *Client) scan(ctx context.Context, srv *redis.Client, match string, keep func(string) bool, named bool, yield func(LockInfo, error) bool) (bool, error) {
	addr := srv.Options().Addr
	var cursor uint64
	for {
		var names []string
		var infos []LockInfo
		err := c.within(ctx, func(ctx context.Context) error {
			var err error
			names, cursor, err = srv.ScanType(ctx, cursor, match, scanCount, "hash").Result()
			if err != nil || len(names) == 0 {
				return err
			}
			infos, err = inspectMany(ctx, srv, names)
			return err
		})
		if err != nil {
			return true, fmt.Errorf("lock: list: %s: %w", addr, redisError(err))
		}
		for _, info := range infos {
			key, ok := c.keyOf(info.Name)
			if !ok || (!info.Held && !info.Reserved) || !keep(key) {
				continue
			}
			info.Key = key
			if named {
				info.Node = addr
			}
			if !yield(info, nil) {
				return false, nil
			}
		}
		if cursor == 0 {
			return true, nil
		}
	}
}

// inspectMany reads the locks names of one server in one pipeline.
func inspectMany(ctx context.Context, srv *redis.Client, names []string) ([]LockInfo, error) {
	cmds := (&node{rdb: srv}).pipelined(ctx, len(names), func(i int) (scripts.Script, []string, []any) {
		return scripts.Inspect, []string{names[i], names[i] + ":queue", names[i] + ":waits"}, []any{MaxListedWaiters, MaxListedPermits}
	})
	infos := make([]LockInfo, 0, len(names))
	for i, cmd := range cmds {
		v, err := cmd.Slice()
		if err == nil {
			var info LockInfo
			if info, err = parseInspect(names[i], v); err == nil {
				infos = append(infos, info)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	return infos, nil
}

// keyOf returns the user key of a lock hash's name: "" for one stored by
// its digest; false when name is not a lock of c's prefix.
func (c *Client) keyOf(name string) (string, bool) {
	tag, ok := strings.CutPrefix(name, c.cfg.prefix+":{")
	if !ok {
		return "", false
	}
	tag, ok = strings.CutSuffix(tag, "}")
	if !ok || strings.ContainsAny(tag, "{}") {
		return "", false
	}
	if strings.HasPrefix(tag, "%h") {
		return "", true
	}
	return tagUnescaper.Replace(tag), true
}

// within runs f with ctx in one of the Client's goroutines and returns its
// error, or ctx's error when ctx is done first (f goes on in the
// background until the Redis client gives up), or ErrClosed after Close.
func (c *Client) within(ctx context.Context, f func(context.Context) error) error {
	done := make(chan error, 1)
	if !c.tasks.Run(func() { done <- f(ctx) }) {
		return ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
