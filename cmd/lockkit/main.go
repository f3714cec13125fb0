package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Exit codes (see the package documentation).
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitNotHeld   = 3
	exitDeclined  = 4
	defaultRedis  = "redis://127.0.0.1:6379"
	defaultOutput = "table"
)

func main() {
	redis.SetLogger(quiet{}) // errors are reported once, by the verb
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

// env is what a run talks to, so tests can run it in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// options are the flags every verb takes.
type options struct {
	redis   string
	quorum  bool
	prefix  string
	output  string
	timeout time.Duration
}

func (o *options) register(fs *flag.FlagSet) {
	fs.StringVar(&o.redis, "redis", o.redis, "Redis `URL`: redis:// or rediss://; a comma-separated list for a Redis Cluster's seeds (default $REDIS_URL, else "+defaultRedis+")")
	fs.BoolVar(&o.quorum, "quorum", o.quorum, "the -redis list is the independent masters of quorum mode (lock.NewQuorum)")
	fs.StringVar(&o.prefix, "prefix", o.prefix, "key `prefix` of the locks")
	fs.StringVar(&o.output, "o", o.output, "output `format`: table or json")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound of each Redis call")
}

// A verb is one subcommand. run gets the connected cli and between
// minArgs and maxArgs arguments.
type verb struct {
	name, args, summary string
	minArgs, maxArgs    int
	flags               func(fs *flag.FlagSet, c *cli) // the verb's own flags, if any
	check               func(c *cli) string            // a usage error before connecting, if any
	run                 func(ctx context.Context, c *cli, args []string) int
}

var verbs []verb // set in init: the verbs refer to usage

func init() {
	verbs = []verb{
		{name: "ls", args: "[PATTERN]", summary: "list held locks whose key matches PATTERN (a Redis glob; default *); -internal adds integrations' own", maxArgs: 1, flags: lsFlags, run: runLs},
		{name: "show", args: "KEY", summary: "show KEY's holder, hold count, lease, fencing token and wait queue", minArgs: 1, maxArgs: 1, run: runShow},
		{name: "watch", args: "KEY", summary: "follow KEY's holder, waiters and hand-offs until interrupted", minArgs: 1, maxArgs: 1, run: runWatch},
		{name: "unlock", args: "--force [--yes] KEY", summary: "end KEY's hold, whoever holds it; the next waiter gets it, the holder is fenced", minArgs: 1, maxArgs: 1, flags: unlockFlags, check: checkUnlock, run: runUnlock},
	}
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, e env) int {
	opts := options{prefix: "lockkit", output: defaultOutput, timeout: 5 * time.Second}
	if u := e.getenv("REDIS_URL"); u != "" {
		opts.redis = u
	}
	global := flag.NewFlagSet("lockkit", flag.ContinueOnError)
	global.SetOutput(e.stderr)
	opts.register(global)
	global.Usage = func() { usage(e.stderr, global) }
	if err := global.Parse(args); err != nil {
		return parseExit(err)
	}
	if global.NArg() == 0 {
		usage(e.stderr, global)
		return exitUsage
	}
	name := global.Arg(0)
	for _, v := range verbs {
		if v.name == name {
			return runVerb(ctx, v, opts, global.Args()[1:], e)
		}
	}
	fmt.Fprintf(e.stderr, "lockkit: unknown verb %q\n", name)
	usage(e.stderr, global)
	return exitUsage
}

func runVerb(ctx context.Context, v verb, opts options, args []string, e env) int {
	fs := flag.NewFlagSet("lockkit "+v.name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	c := &cli{opts: opts, env: e, verb: v.name}
	c.opts.register(fs)
	if v.flags != nil {
		v.flags(fs, c)
	}
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: lockkit %s %s\n\n%s.\n\nFlags:\n", v.name, v.args, capitalise(v.summary))
		fs.PrintDefaults()
		fmt.Fprint(e.stderr, exitCodes)
	}
	if err := parseInterspersed(fs, args); err != nil {
		return parseExit(err)
	}
	if c.opts.output != "table" && c.opts.output != "json" {
		return c.usageErr("-o %q: want table or json", c.opts.output)
	}
	if c.opts.timeout <= 0 {
		return c.usageErr("-timeout %v: must be positive", c.opts.timeout)
	}
	if n := fs.NArg(); n < v.minArgs || n > v.maxArgs {
		return c.usageErr("want %s, got %d arguments", v.args, n)
	}
	if v.check != nil {
		if msg := v.check(c); msg != "" {
			return c.usageErr("%s", msg)
		}
	}
	args = fs.Args()
	for i, a := range args { // KEY and PATTERN arguments: as display prints them
		var err error
		if args[i], err = keyArg(a); err != nil {
			return c.usageErr("%v", err)
		}
	}
	if c.opts.redis == "" {
		c.opts.redis = defaultRedis
	}
	if err := c.connect(ctx); err != nil {
		c.close()
		return c.connectErr(err)
	}
	defer c.close()
	return v.run(ctx, c, args)
}

// parseInterspersed parses flags anywhere among args, as in
// "lockkit ls 'orders:*' -o json"; "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) error {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if len(args) > fs.NArg() && args[len(args)-fs.NArg()-1] == "--" {
			rest = append(rest, fs.Args()...)
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, rest...))
}

func parseExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	return exitUsage
}

func usage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprint(w, "Usage: lockkit [flags] VERB [ARGS]\n\nVerbs:\n")
	for _, v := range verbs {
		fmt.Fprintf(w, "  %-6s %-20s %s\n", v.name, v.args, v.summary)
	}
	fmt.Fprint(w, "\n\"lockkit VERB -h\" tells more of each.\n\nFlags:\n")
	global.PrintDefaults()
	fmt.Fprint(w, exitCodes)
}

const exitCodes = `
Exit codes: 0 done; 1 failure (Redis unreachable or refused); 2 bad usage
(also a -redis URL that does not parse, a bad -prefix); 3 unlock --force:
the key is not held, or no longer by the holder shown; 4 unlock --force: not
confirmed (answered no, stdin closed, or interrupted at the prompt).
`

func capitalise(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// quiet drops go-redis's log lines.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
