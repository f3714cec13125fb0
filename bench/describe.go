package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// describe returns the report's opening: when, where, with what and how the
// run was made.
func describe(ctx context.Context, cfg config, admin *redis.Client) (string, error) {
	server, err := admin.InfoMap(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("INFO server: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "## lockkit side-by-side benchmark\n\n")
	fmt.Fprintf(&b, "- Run: %s UTC, `%s` in `bench/`\n",
		time.Now().UTC().Format("2006-01-02 15:04"), strings.Join(append([]string{"go", "run", "."}, cfg.args...), " "))
	fmt.Fprintf(&b, "- Machine: %s, %d logical CPUs, GOMAXPROCS %d, %s/%s\n",
		cpuModel(), runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	fmt.Fprintf(&b, "- Go %s; Redis %s on loopback, started by the harness (no persistence)\n",
		strings.TrimPrefix(runtime.Version(), "go"), server["Server"]["redis_version"])
	fmt.Fprintf(&b, "- Libraries: %s\n", strings.Join(libraryVersions(), ", "))
	fmt.Fprintf(&b, "- %d round(s), libraries interleaved in each (lockkit, redsync, redislock, floor); "+
		"each cell is the median over the rounds with (min–max). Lease %v in scenarios 1-4 and 8.\n\n", cfg.rounds, cfg.lease)
	return b.String(), nil
}

// cpuModel reads the first "model name" of /proc/cpuinfo.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, value, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(value)
		}
	}
	return "unknown CPU"
}

// libraryVersions lists the lock libraries and go-redis as built.
func libraryVersions() []string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return []string{"unknown"}
	}
	wanted := map[string]bool{
		"github.com/lockkit/lockkit":       true,
		"github.com/go-redsync/redsync/v4": true,
		"github.com/bsm/redislock":         true,
		"github.com/redis/go-redis/v9":     true,
	}
	var out []string
	for _, d := range bi.Deps {
		if !wanted[d.Path] {
			continue
		}
		v := d.Version
		if d.Replace != nil {
			v = "this checkout"
		}
		out = append(out, d.Path+" "+v)
	}
	return out
}
