package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// config is what the flags set.
type config struct {
	smoke       bool
	rounds      int
	run         time.Duration // one measured run of scenarios 1, 3, 4, 6 and 8
	hold        time.Duration // scenario 2: how long the holder holds
	lease       time.Duration // scenarios 1-4, 6 and 8
	locks       int           // scenario 5: locks held at once
	heldLease   time.Duration // scenario 5
	memKeys     int           // scenarios 7 and 9: distinct keys taken and released once each
	shareHold   time.Duration // scenario 8's contended cases: how long each holder holds
	scenarios   map[int]bool
	redisServer string
	cpuProfile  string
	syscalls    bool   // count the system calls of scenario 1 per library instead
	pairs       int    // -syscalls: pairs per library
	strace      string // -syscalls: the strace binary
	child       string // internal: run -pairs pairs of this library against childAddr and exit
	childAddr   string
	args        []string // as given, for the report
}

// smokeDefaults replace the defaults of flags not given with -smoke: about
// a second per scenario (scenarios 7 and 9: their wait of one lease and more), one
// round. The figures only show that it runs.
var smokeDefaults = map[string]string{
	"rounds":     "1",
	"run":        "100ms",
	"hold":       "300ms",
	"locks":      "1000",
	"held-lease": "600ms",
	"memkeys":    "2000",
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{args: args}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: go run . [flags]   (from the bench folder)")
		fmt.Fprintln(stderr, "Starts its own redis-server, runs every scenario for every library, prints Markdown tables.")
		fs.PrintDefaults()
	}
	fs.BoolVar(&cfg.smoke, "smoke", false, "short run that only shows the harness works: 1 round, ~1 s per scenario (scenarios 7 and 9: ~8 s per library)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds; libraries run interleaved in each")
	fs.DurationVar(&cfg.run, "run", 1500*time.Millisecond, "length of one measured run in scenarios 1, 3, 4, 6 and 8")
	fs.DurationVar(&cfg.hold, "hold", 3*time.Second, "scenario 2: how long the holder holds while the waiter waits")
	fs.DurationVar(&cfg.lease, "lease", 8*time.Second, "lease in scenarios 1-4, 6 and 8 (redsync's default expiry)")
	fs.IntVar(&cfg.locks, "locks", 10_000, "scenario 5: locks held at once")
	fs.DurationVar(&cfg.heldLease, "held-lease", 3*time.Second, "scenario 5: lease (renewed every third of it)")
	fs.IntVar(&cfg.memKeys, "memkeys", 1_000_000, "scenarios 7 and 9: distinct keys taken and released once each")
	fs.DurationVar(&cfg.shareHold, "sharehold", time.Millisecond, "scenario 8's contended cases: how long each holder holds (the issue's target is for 1ms)")
	only := fs.String("scenarios", "1,2,3,4,5,8",
		"comma-separated scenarios to run (6, lockkit's modes, and 7 and 9, Redis memory, only when named; -smoke adds them)")
	fs.StringVar(&cfg.redisServer, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&cfg.syscalls, "syscalls", false,
		"instead of the scenarios: system calls per uncontended lock + unlock for every library, under strace -f -c (about a minute)")
	fs.IntVar(&cfg.pairs, "pairs", 20_000, "-syscalls: lock + unlock pairs per library")
	fs.StringVar(&cfg.strace, "strace", "strace", "-syscalls: strace binary")
	fs.StringVar(&cfg.child, "child", "", "internal to -syscalls: the library a traced child process runs")
	fs.StringVar(&cfg.childAddr, "child-addr", "", "internal to -syscalls: the Redis address of a traced child process")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	err := cfg.finish(fs, *only)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
	}
	return cfg, err
}

// finish applies -smoke, reads -scenarios and checks the values.
func (cfg *config) finish(fs *flag.FlagSet, only string) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if cfg.smoke {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for name, v := range smokeDefaults {
			if !given[name] {
				if err := fs.Set(name, v); err != nil {
					return err
				}
			}
		}
		if !given["scenarios"] {
			only += ",6,7,9"
		}
	}
	cfg.scenarios = map[int]bool{}
	for s := range strings.SplitSeq(only, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 9 {
			return fmt.Errorf("-scenarios: %q is not a scenario (1 to 9)", s)
		}
		cfg.scenarios[n] = true
	}
	var errs []error
	if cfg.rounds < 1 {
		errs = append(errs, fmt.Errorf("-rounds %d: must be at least 1", cfg.rounds))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"run", cfg.run}, {"hold", cfg.hold}, {"lease", cfg.lease}, {"held-lease", cfg.heldLease}, {"sharehold", cfg.shareHold}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("-%s %v: must be positive", d.name, d.v))
		}
	}
	if cfg.scenarios[2] && cfg.hold >= cfg.lease {
		errs = append(errs, fmt.Errorf("-hold %v: must be shorter than -lease %v, or the holder's lease ends while it holds", cfg.hold, cfg.lease))
	}
	if cfg.locks < 2 {
		errs = append(errs, fmt.Errorf("-locks %d: must be at least 2", cfg.locks))
	}
	if cfg.pairs < 1 && cfg.child == "" { // a child's 0 pairs measure its set-up
		errs = append(errs, fmt.Errorf("-pairs %d: must be at least 1", cfg.pairs))
	}
	if cfg.child != "" && (cfg.childAddr == "" || cfg.pairs < 0) {
		errs = append(errs, errors.New("-child needs -child-addr and -pairs ≥ 0"))
	}
	if cfg.memKeys < 1 {
		errs = append(errs, fmt.Errorf("-memkeys %d: must be at least 1", cfg.memKeys))
	}
	return errors.Join(errs...)
}
