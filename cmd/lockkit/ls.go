package main

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strings"

	"github.com/lockkit/lockkit/lock"
)

func lsFlags(fs *flag.FlagSet, c *cli) {
	fs.BoolVar(&c.internal, "internal", false, "also list the locks integrations take for their own bookkeeping (lock.Integration.Internal, such as cronlock's tick markers)")
}

// runLs lists held locks matching the pattern, sorted by key, without
// integration-internal ones unless -internal. When a server fails (a
// quorum node, a Cluster master), it lists what the others hold, then
// reports the failure (exit 1).
func runLs(ctx context.Context, c *cli, args []string) int {
	pattern := "*"
	if len(args) == 1 {
		pattern = args[0]
	}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	var infos []lock.LockInfo
	var failed error // a server that failed: reported after what the others hold
	for info, err := range c.client.List(ctx, pattern) {
		switch {
		case errors.Is(err, lock.ErrInvalid):
			return c.usageErr("%v", err)
		case err != nil:
			failed = err
		case info.Holder.Internal && !c.internal:
		default:
			infos = append(infos, info)
		}
	}
	slices.SortFunc(infos, func(a, b lock.LockInfo) int {
		return strings.Compare(keyOf(a)+"\x00"+a.Node, keyOf(b)+"\x00"+b.Node)
	})
	var err error
	if c.opts.output == "json" {
		for _, in := range infos {
			if err = writeJSON(c.env.stdout, infoJSON(in)); err != nil {
				break
			}
		}
	} else {
		err = lsTable(c.env.stdout, infos)
	}
	if err == nil {
		err = failed
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}
