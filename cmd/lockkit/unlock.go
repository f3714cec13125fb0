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
	// Permits are the holds ended of a semaphore or read-write lock.
	Permits []jsonPermit `json:"permits,omitempty"`
}

// checkUnlock insists on --force.
func checkUnlock(c *cli) string {
	if !c.force {
		return "unlock needs --force: it ends whoever holds the key, not a hold of lockkit's own"
	}
	return ""
}

// runUnlock force-unlocks a key after showing its holder and asking.
// With confirmation, it ends only the holder the operator was shown: of
// a semaphore or read-write lock, each holder shown, one by one.
func runUnlock(ctx context.Context, c *cli, args []string) int {
	key := args[0]
	holders := [][]lock.ForceOption{nil} // one ForceUnlock each; nil: whoever holds key
	if !c.yes {
		info, code, ok := c.confirm(ctx, key)
		if !ok {
			return code
		}
		holders = holders[:0]
		for _, o := range shownHolders(info) {
			holders = append(holders, []lock.ForceOption{lock.IfHeldBy(o.ID)})
		}
	}
	var f lock.Forced
	ended := 0
	for _, opts := range holders {
		cctx, cancel := c.callContext(ctx)
		one, err := c.client.ForceUnlock(cctx, key, opts...)
		cancel()
		switch {
		case errors.Is(err, lock.ErrInvalid):
			return c.usageErr("%v", err)
		case (errors.Is(err, lock.ErrNotHeld) || errors.Is(err, lock.ErrHolderChanged)) && len(holders) > 1:
			fmt.Fprintf(c.env.stderr, "lockkit unlock: %q: %v; skipped\n", key, err)
			continue
		case errors.Is(err, lock.ErrNotHeld):
			fmt.Fprintf(c.env.stderr, "lockkit unlock: %q is not held (prefix %q); nothing changed\n", key, c.opts.prefix)
			return exitNotHeld
		case errors.Is(err, lock.ErrHolderChanged):
			fmt.Fprintf(c.env.stderr, "lockkit unlock: %q changed hands since it was shown: %v; nothing changed (run again to see its holder)\n", key, err)
			return exitNotHeld
		case err != nil:
			return c.fail(err)
		}
		if ended == 0 {
			f = one
		} else {
			f.Permits = append(f.Permits, one.Permits...)
		}
		ended++
	}
	if ended == 0 {
		fmt.Fprintf(c.env.stderr, "lockkit unlock: none of the holders shown holds %q any more; nothing changed\n", key)
		return exitNotHeld
	}
	if err := c.forced(key, f); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// forced writes what ForceUnlock did.
func (c *cli) forced(key string, f lock.Forced) error {
	if c.opts.output == "json" {
		return writeJSON(c.env.stdout, jsonForced{Key: display(key), KeyBase64: keyBase64(key), Holder: ownerJSON(f.Holder), Token: f.Token,
			HandedTo: ownerJSON(f.HandedTo), NewToken: f.NewToken, Permits: permitsJSON(f.Permits)})
	}
	if len(f.Permits) > 0 {
		if _, err := fmt.Fprintf(c.env.stdout, "force-unlocked %q: ended %d holds; the waiters get their room\n", key, len(f.Permits)); err != nil {
			return err
		}
		for _, p := range f.Permits {
			if _, err := fmt.Fprintf(c.env.stdout, "  %s (token %s)\n", p.Owner, token(p.Token)); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := fmt.Fprintf(c.env.stdout, "force-unlocked %q: ended the hold of %s (token %s)\n", key, f.Holder, token(f.Token))
	if err == nil && f.HandedTo.ID != "" {
		_, err = fmt.Fprintf(c.env.stdout, "handed to the next waiter, %s, with token %d\n", f.HandedTo, f.NewToken)
	}
	return err
}

// shownHolders are the holders confirm showed: a lock's holder, or the
// listed holders of a semaphore or read-write lock.
func shownHolders(info lock.LockInfo) []lock.Owner {
	if !shared(info) {
		return []lock.Owner{info.Holder}
	}
	var owners []lock.Owner
	for _, p := range info.Permits {
		owners = append(owners, p.Owner)
	}
	return owners
}

// confirm shows key's holders and asks on stdin; it returns what it
// showed and whether to go on, and the exit code when not. An interrupt
// (ctx ending) while it waits for the answer is no.
func (c *cli) confirm(ctx context.Context, key string) (lock.LockInfo, int, bool) {
	cctx, cancel := c.callContext(ctx)
	defer cancel()
	info, err := c.client.Inspect(cctx, key)
	switch {
	case errors.Is(err, lock.ErrInvalid):
		return info, c.usageErr("%v", err), false
	case err != nil:
		return info, c.fail(err), false
	case !info.Held:
		fmt.Fprintf(c.env.stderr, "lockkit unlock: %q is not held (prefix %q); nothing changed\n", key, c.opts.prefix)
		return info, exitNotHeld, false
	}
	if shared(info) {
		fmt.Fprintf(c.env.stderr, "%q is a %s: %s; %d waiting. Holds to end:\n", key, info.Kind, holdersSummary(info), info.Waiting)
		for _, p := range info.Permits {
			fmt.Fprintf(c.env.stderr, "  %s (%s, count %d, lease left %s, token %s)\n", p.Owner, permitKind(info.Kind, p), p.HoldCount, dur(p.RemainingLease), token(p.Token))
		}
		if more := info.Holding - len(info.Permits); more > 0 {
			fmt.Fprintf(c.env.stderr, "  (%d more not listed stay; --yes ends every holder)\n", more)
		}
		fmt.Fprint(c.env.stderr, "Each holder loses its hold at its next renewal; its writes with that token must be rejected by token.\nForce-unlock? [y/N] ")
	} else {
		fmt.Fprintf(c.env.stderr, "%q is held by %s (count %d, lease left %s, token %s); %d waiting.\n",
			key, info.Holder, info.HoldCount, dur(info.RemainingLease), token(info.Token), info.Waiting)
		fmt.Fprint(c.env.stderr, "The holder loses it at its next renewal; its writes with that token must be rejected by token.\nForce-unlock? [y/N] ")
	}
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
		return info, exitDeclined, false
	}
	if f, ok := c.env.stdin.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
			fmt.Fprintln(c.env.stderr, strings.TrimSpace(line)) // not a terminal: show the answer read
		}
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return info, 0, true
	}
	fmt.Fprintln(c.env.stderr, "not confirmed; nothing changed")
	return info, exitDeclined, false
}
