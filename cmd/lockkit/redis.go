package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// cli is one run of a verb.
type cli struct {
	opts options
	env  env
	verb string

	force, yes  bool   // unlock's flags
	internal    bool   // ls's flag
	lastMsg     string // watch: the last message reported
	lastRelease string // watch: the last release reported (see releaseID)

	rdbs   []redis.UniversalClient // one, or the quorum's masters
	client *lock.Client
}

// usageError is an error of connect's that is bad usage (exit 2): a
// -redis URL that does not parse, a -quorum list naming a server twice.
type usageError struct{ error }

// parseURL parses a -redis URL; its error is a usageError that shows
// the URL without its password.
func parseURL(u string) (*redis.Options, error) {
	opt, err := redis.ParseURL(u)
	if err != nil {
		return nil, usageError{fmt.Errorf("-redis %s: %w", redacted(u), err)}
	}
	return opt, nil
}

// redacted is u with its password, if any, as "xxxxx"; a URL that does not
// parse is not shown.
func redacted(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(a URL that does not parse)"
	}
	return strconv.Quote(p.Redacted())
}

// connect makes the Redis clients of -redis and the lock Client over them.
// Its errors wrapping lock.ErrInvalid (a bad -prefix) or of type
// usageError are bad usage.
func (c *cli) connect(ctx context.Context) error {
	urls := strings.Split(c.opts.redis, ",")
	for i, u := range urls {
		u = strings.TrimSpace(u)
		if !strings.Contains(u, "://") {
			u = "redis://" + u // a bare host:port
		}
		urls[i] = u
	}
	switch {
	case c.opts.quorum:
		if len(urls) < 3 {
			return usageError{fmt.Errorf("-quorum needs at least 3 Redis URLs in -redis, got %d", len(urls))}
		}
		seen := map[string]bool{}
		for _, u := range urls {
			opt, err := parseURL(u)
			if err != nil {
				return err
			}
			server := fmt.Sprintf("%s/%d", opt.Addr, opt.DB)
			if seen[server] {
				return usageError{fmt.Errorf("-quorum: -redis names %s twice: its answer would count twice toward the majority", server)}
			}
			seen[server] = true
			c.rdbs = append(c.rdbs, redis.NewClient(opt))
		}
	case len(urls) > 1:
		rdb, err := clusterOf(urls)
		if err != nil {
			return err
		}
		c.rdbs = append(c.rdbs, rdb)
	default:
		rdb, err := single(ctx, urls[0], c.opts)
		if err != nil {
			return err
		}
		c.rdbs = append(c.rdbs, rdb)
	}
	opts := []lock.Option{lock.WithPrefix(c.opts.prefix), lock.WithOwnerLabel("lockkit-cli")}
	var err error
	if c.opts.quorum {
		c.client, err = lock.NewQuorum(c.rdbs, append(opts, lock.WithNodeTimeout(c.opts.timeout))...)
	} else {
		c.client, err = lock.New(c.rdbs[0], opts...)
	}
	return err
}

// single connects to the server of url, or to its cluster when the server
// is a Redis Cluster node.
func single(ctx context.Context, url string, o options) (redis.UniversalClient, error) {
	opt, err := parseURL(url)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(opt)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	info, err := rdb.Info(ctx, "cluster").Result()
	if err != nil {
		_ = rdb.Close()
		return nil, fmt.Errorf("redis %s: %w", opt.Addr, err)
	}
	if !strings.Contains(info, "cluster_enabled:1") {
		return rdb, nil
	}
	_ = rdb.Close()
	return clusterOf([]string{url})
}

// clusterOf is a Redis Cluster client seeded with urls; user, password and
// TLS come from the first.
func clusterOf(urls []string) (*redis.ClusterClient, error) {
	var addrs []string
	var first *redis.Options
	for _, u := range urls {
		opt, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		if opt.DB != 0 {
			return nil, usageError{fmt.Errorf("-redis %s: a Redis Cluster has database 0 only", redacted(u))}
		}
		if first == nil {
			first = opt
		}
		addrs = append(addrs, opt.Addr)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:     addrs,
		Username:  first.Username,
		Password:  first.Password,
		TLSConfig: first.TLSConfig,
	}), nil
}

func (c *cli) close() {
	if c.client != nil {
		_ = c.client.Close()
	}
	for _, rdb := range c.rdbs {
		_ = rdb.Close()
	}
}

// callContext bounds one Redis call by -timeout.
func (c *cli) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.timeout)
}

// fail reports err and returns the exit code of a failure.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.env.stderr, "lockkit %s: %v\n", c.verb, err)
	return exitFailure
}

// connectErr reports an error of connect, as bad usage when it is.
func (c *cli) connectErr(err error) int {
	var ue usageError
	if errors.As(err, &ue) || errors.Is(err, lock.ErrInvalid) {
		return c.usageErr("%v", err)
	}
	return c.fail(err)
}

// usageErr reports a usage error and returns its exit code.
func (c *cli) usageErr(format string, args ...any) int {
	fmt.Fprintf(c.env.stderr, "lockkit %s: %s (lockkit %s -h for help)\n", c.verb, fmt.Sprintf(format, args...), c.verb)
	return exitUsage
}
