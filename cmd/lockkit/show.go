package main

import (
	"context"
	"errors"

	"github.com/lockkit/lockkit/lock"
)

// runShow shows one lock in full.
func runShow(ctx context.Context, c *cli, args []string) int {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	info, err := c.client.Inspect(ctx, args[0])
	switch {
	case errors.Is(err, lock.ErrInvalid):
		return c.usageErr("%v", err)
	case err != nil:
		return c.fail(err)
	}
	if c.opts.output == "json" {
		err = writeJSON(c.env.stdout, infoJSON(info))
	} else {
		err = showText(c.env.stdout, info)
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}
