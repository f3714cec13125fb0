package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// syscallsLimit bounds a whole -syscalls run.
const syscallsLimit = 2 * time.Minute

// countSyscalls is -syscalls: for every library it runs this program again
// as a child process under strace -f -c, once doing cfg.pairs uncontended
// lock + unlock pairs and once doing none, against a redis-server it
// started itself (not traced), and prints the system calls per pair: the
// difference of the two runs over cfg.pairs, so that the process's start,
// the client's set-up and its exit, the same in both, count for nothing.
func countSyscalls(ctx context.Context, cfg config, out, progress io.Writer) error {
	strace, err := exec.LookPath(cfg.strace)
	if err != nil {
		return fmt.Errorf("-syscalls counts with strace, which is missing (apt-get install strace, or -strace PATH): %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "lockkit-syscalls-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeoutCause(ctx, syscallsLimit,
		fmt.Errorf("-syscalls took over %v: try fewer -pairs", syscallsLimit))
	defer cancel()
	srv, err := startServer(ctx, cfg.redisServer)
	if err != nil {
		return err
	}
	defer srv.stop()
	admin := redis.NewClient(&redis.Options{Addr: srv.addr})
	defer admin.Close()

	tracer := childTracer{strace: strace, self: self, dir: dir, addr: srv.addr, lease: cfg.lease}
	start := time.Now()
	rows := make([]syscallRow, 0, len(libraries))
	for _, lib := range libraries {
		row := syscallRow{lib: lib.name, pairs: cfg.pairs}
		for _, run := range []struct {
			pairs  int
			counts *syscallCounts
		}{{0, &row.setUp}, {cfg.pairs, &row.run}} {
			if err := admin.FlushAll(ctx).Err(); err != nil {
				return fmt.Errorf("FLUSHALL: %w", context.Cause(ctx))
			}
			if *run.counts, err = tracer.trace(ctx, lib.name, run.pairs); err != nil {
				return fmt.Errorf("%s, %d pairs: %w", lib.name, run.pairs, errors.Join(err, context.Cause(ctx)))
			}
			fmt.Fprintf(progress, "%6.1fs  %-9s  %6d pairs: %d system calls\n",
				time.Since(start).Seconds(), lib.name, run.pairs, run.counts.total())
		}
		rows = append(rows, row)
	}
	writeSyscalls(out, cfg, straceVersion(strace), rows)
	return nil
}

// childTracer runs this program as a child under strace.
type childTracer struct {
	strace, self, dir string
	addr              string // the Redis the child uses
	lease             time.Duration
}

// trace runs pairs pairs of lib in a child process under strace -f -c and
// returns the system calls of all of the child's threads. The child runs
// in a process group of its own, which is killed if ctx ends first.
func (t childTracer) trace(ctx context.Context, lib string, pairs int) (syscallCounts, error) {
	summary := filepath.Join(t.dir, fmt.Sprintf("%s-%d.txt", lib, pairs))
	cmd := exec.CommandContext(ctx, t.strace, "-f", "-c", "-U", "name,calls", "-o", summary, "--",
		t.self, "-child", lib, "-child-addr", t.addr, "-pairs", strconv.Itoa(pairs), "-lease", t.lease.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, stderr.Bytes())
	}
	text, err := os.ReadFile(summary)
	if err != nil {
		return nil, err
	}
	return parseStraceSummary(string(text))
}

// tracedChild is what the child process runs (-child): it opens the
// library as every scenario does (a new client, one pair to warm up), does
// cfg.pairs pairs on one key and closes it. It sets up nothing else.
func tracedChild(ctx context.Context, cfg config, _, _ io.Writer) (err error) {
	i := slices.IndexFunc(libraries, func(l library) bool { return l.name == cfg.child })
	if i < 0 {
		return fmt.Errorf("-child %q: no such library", cfg.child)
	}
	e := &env{addr: cfg.childAddr, cfg: cfg}
	s, err := e.open(ctx, libraries[i], cfg.lease, nil)
	if err != nil {
		return err
	}
	defer closeAll(&err, s)
	key := e.key("syscalls")
	for range cfg.pairs {
		release, err := s.lock(ctx, key)
		if err != nil {
			return err
		}
		if err := release(); err != nil {
			return err
		}
	}
	return nil
}

// straceVersion is the first line of strace -V, such as "strace -- version 6.1".
func straceVersion(strace string) string {
	v, err := exec.Command(strace, "-V").Output()
	if err != nil {
		return "strace, version unknown"
	}
	first, _, _ := strings.Cut(string(v), "\n")
	return first
}

// syscallRow is one library's two traced runs.
type syscallRow struct {
	lib        string
	pairs      int
	setUp, run syscallCounts
}

func writeSyscalls(w io.Writer, cfg config, version string, rows []syscallRow) {
	fmt.Fprintf(w, "## System calls per uncontended lock + unlock\n\n")
	fmt.Fprintf(w, "- Run: %s UTC, `%s` in `bench/`; %s\n",
		time.Now().UTC().Format("2006-01-02 15:04"), strings.Join(append([]string{"go", "run", "."}, cfg.args...), " "), version)
	fmt.Fprintf(w, "- Machine: %s, %d logical CPUs, GOMAXPROCS %d, Go %s\n",
		cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), strings.TrimPrefix(runtime.Version(), "go"))
	fmt.Fprintf(w, "- Libraries: %s\n", strings.Join(libraryVersions(), ", "))
	fmt.Fprintf(w, "- Each library runs in a child process of the harness under `strace -f -c` (all of the child's threads; "+
		"Redis and the harness are not traced): opened as in scenario 1 (a new go-redis client, one pair to warm up), "+
		"then %s lock + unlock pairs on one key, then closed; and once more with no pairs. "+
		"Per pair is the difference of the two runs over the pairs: the start, set-up and exit count in both and cancel out.\n\n",
		formatNum(float64(cfg.pairs), 0))
	fmt.Fprintln(w, "| library | pairs | system calls | without the pairs | system calls/pair | most frequent, per pair |")
	fmt.Fprintln(w, "|:--|--:|--:|--:|--:|:--|")
	judged := newTable("", "", column{colSyscalls, "", 1})
	for _, r := range rows {
		per := r.run.sub(r.setUp)
		perPair := float64(per.total()) / float64(r.pairs)
		judged.add(r.lib, figures{colSyscalls: perPair})
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.lib, formatNum(float64(r.pairs), 0),
			formatNum(float64(r.run.total()), 0), formatNum(float64(r.setUp.total()), 0),
			formatNum(perPair, 1), per.top(3, float64(r.pairs)))
	}
	fmt.Fprintln(w)
	writeVerdicts(w, cfg, []check{ratioCheck(judged, "system calls per uncontended pair ≤ 1.1× the best peer's (issue 32)",
		colSyscalls, 1.1, "best peer", bestPeer(judged, colSyscalls, false), false)})
}

// colSyscalls is the key of the system calls per pair a -syscalls run
// judges.
const colSyscalls = "syscalls/pair"
