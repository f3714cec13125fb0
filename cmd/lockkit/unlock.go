package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/lockkit/lockkit/lock"
)

func unlockFlags(fs *flag.FlagSet, c *cli) {
	fs.BoolVar(&c.force, "force", false, "required: end the hold of a lock lockkit does not hold itself")
	fs.BoolVar(&c.yes, "yes", false, "do not ask for confirmation")
}

// jsonForced is what unlock --force -o json writes.
type jsonForced struct {
	Key       string     `json:"key"`
	KeyBase64 string     `json:"key_base64"`
	Holder    *jsonOwner `json:"holder"`
	Token     uint64     `json:"token"`
	HandedTo  *jsonOwner `json:"handed_to,omitempty"`
	NewToken  uint64     `json:"new_token,omitempty"`
}

// checkUnlock insists on --force.
func checkUnlock(c *cli) string {
	if !c.force {
		return "unlock needs --force: it ends whoever holds the key, not a hold of lockkit's own"
	}
	return ""
}

// runUnlock force-unlocks a key after showing its holder and asking.
// With confirmation, it ends only the holder the operator was shown.
func runUnlock(ctx context.Context, c *cli, args []string) int {
	key := args[0]
	var opts []lock.ForceOption
	if !c.yes {
		holder, code, ok := c.confirm(ctx, key)
		if !ok {
			return code
		}
		opts = append(opts, lock.IfHeldBy(holder.ID))
	}
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	f, err := c.client.ForceUnlock(cctx, key, opts...)
	switch {
	case errors.Is(err, lock.ErrInvalid):
		return c.usageErr("%v", err)
	case errors.Is(err, lock.ErrNotHeld):
		fmt.Fprintf(c.env.stderr, "lockkit unlock: %q is not held (prefix %q); nothing changed\n", key, c.opts.prefix)
		return exitNotHeld
	case errors.Is(err, lock.ErrHolderChanged):
		fmt.Fprintf(c.env.stderr, "lockkit unlock: %q changed hands since it was shown: %v; nothing changed (run again to see its holder)\n", key, err)
		return exitNotHeld
	case err != nil:
		return c.fail(err)
	}
	if c.opts.output == "json" {
		err = writeJSON(c.env.stdout, jsonForced{Key: display(key), KeyBase64: keyBase64(key), Holder: ownerJSON(f.Holder), Token: f.Token, HandedTo: ownerJSON(f.HandedTo), NewToken: f.NewToken})
	} else {
		_, err = fmt.Fprintf(c.env.stdout, "force-unlocked %q: ended the hold of %s (token %s)\n", key, f.Holder, token(f.Token))
		if err == nil && f.HandedTo.ID != "" {
			_, err = fmt.Fprintf(c.env.stdout, "handed to the next waiter, %s, with token %d\n", f.HandedTo, f.NewToken)
		}
	}
	if err != nil {
		return c.fail(err)
	}
	return exitOK
}

// confirm shows key's holder and asks on stdin; it returns the holder
// shown and whether to go on, and the exit code when not. An interrupt
// (ctx ending) while it waits for the answer is no.
func (c *cli) confirm(ctx context.Context, key string) (lock.Owner, int, bool) {
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	info, err := c.client.Inspect(cctx, key)
	switch {
	case errors.Is(err, lock.ErrInvalid):
		return lock.Owner{}, c.usageErr("%v", err), false
	case err != nil:
		return lock.Owner{}, c.fail(err), false
	case !info.Held:
		fmt.Fprintf(c.env.stderr, "lockkit unlock: %q is not held (prefix %q); nothing changed\n", key, c.opts.prefix)
		return lock.Owner{}, exitNotHeld, false
	}
	fmt.Fprintf(c.env.stderr, "%q is held by %s (count %d, lease left %s, token %s); %d waiting.\n",
		key, info.Holder, info.HoldCount, dur(info.RemainingLease), token(info.Token), info.Waiting)
	fmt.Fprint(c.env.stderr, "The holder loses it at its next renewal; its writes with that token must be rejected by token.\nForce-unlock? [y/N] ")
	answer := make(chan string, 1)
	go func() { // ends when stdin has a line or closes (at the latest at exit)
		line, _ := bufio.NewReader(c.env.stdin).ReadString('\n')
		answer <- line
	}()
	var line string
	select {
	case line = <-answer:
	case <-ctx.Done():
		fmt.Fprintln(c.env.stderr, "\ninterrupted; nothing changed")
		return lock.Owner{}, exitDeclined, false
	}
	if f, ok := c.env.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
			fmt.Fprintln(c.env.stderr, strings.TrimSpace(line)) // not a terminal: show the answer read
		}
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return info.Holder, 0, true
	}
	fmt.Fprintln(c.env.stderr, "not confirmed; nothing changed")
	return lock.Owner{}, exitDeclined, false
}
