package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the harness and returns the exit code: 0 when every scenario
// ran (whether or not the targets were met), 1 when one failed or the run
// was interrupted, 2 for bad flags.
func run(args []string, out, progress io.Writer) int {
	cfg, err := parseFlags(args, progress)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal ends the process at once
	}()
	do := bench
	switch {
	case cfg.child != "":
		do = tracedChild
	case cfg.syscalls:
		do = countSyscalls
	}
	if err := do(ctx, cfg, out, progress); err != nil {
		fmt.Fprintln(progress, "bench:", err)
		return 1
	}
	return 0
}

// env is what scenarios share: the server, a client for INFO that no
// scenario counts, and the settings.
type env struct {
	addr  string
	admin *redis.Client
	cfg   config
	runs  int // runs started, so that every run has keys of its own
}

// key returns a Redis key no earlier run used.
func (e *env) key(name string) string { return fmt.Sprintf("bench:%d:%s", e.runs, name) }

// A scenario case is run for every library in every round (or for its
// own rows), filling its table. A library without the feature it needs
// returns errNotApplicable.
type scenario struct {
	table *table
	run   func(ctx context.Context, e *env, lib library) (figures, error)
	libs  []library // the rows it runs, in this order; nil: the libraries
}

// rows returns the libraries sc runs.
func (sc scenario) rows() []library {
	if sc.libs == nil {
		return libraries
	}
	return sc.libs
}

func bench(ctx context.Context, cfg config, out, progress io.Writer) (err error) {
	if cfg.cpuProfile != "" {
		var stopProfile func() error
		if stopProfile, err = startProfile(cfg.cpuProfile); err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stopProfile()) }()
	}
	srv, err := startServer(ctx, cfg.redisServer)
	if err != nil {
		return err
	}
	defer srv.stop()
	admin := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer admin.Close()
	e := &env{addr: srv.addr, admin: admin, cfg: cfg}
	env, err := describe(ctx, cfg, admin)
	if err != nil {
		return err
	}

	scenarios, checks := plan(cfg)
	start := time.Now()
	for round := 1; round <= cfg.rounds; round++ {
		for _, sc := range scenarios {
			for _, lib := range sc.rows() {
				if err := runOne(ctx, e, sc, lib); err != nil {
					return fmt.Errorf("round %d, %s, %s: %w", round, sc.table.title, lib.name, err)
				}
				fmt.Fprintf(progress, "%6.1fs  round %d/%d  %-9s  %.60s\n",
					time.Since(start).Seconds(), round, cfg.rounds, lib.name, sc.table.title)
			}
		}
	}

	fmt.Fprint(out, env)
	for _, sc := range scenarios {
		sc.table.write(out)
	}
	writeVerdicts(out, cfg, checks)
	return nil
}

// runOne runs sc for lib on an emptied Redis and records the figures.
func runOne(ctx context.Context, e *env, sc scenario, lib library) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.runs++
	if err := e.admin.FlushAll(ctx).Err(); err != nil {
		return fmt.Errorf("FLUSHALL: %w", err)
	}
	runtime.GC()
	f, err := sc.run(ctx, e, lib)
	switch {
	case errors.Is(err, errNotApplicable):
		sc.table.notApplicable(lib.name)
	case err != nil:
		return err
	default:
		sc.table.add(lib.name, f)
	}
	return nil
}

func startProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
