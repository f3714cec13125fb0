package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisStats is what Redis reports about the work it did: calls per
// command (INFO commandstats, which counts the commands scripts run too)
// and its CPU time in seconds (INFO cpu, used_cpu_sys + used_cpu_user).
type redisStats struct {
	calls map[string]int64
	cpu   float64
}

// readStats asks Redis through admin, a client whose commands no scenario
// counts. INFO itself is left out of the command counts.
func readStats(ctx context.Context, admin *redis.Client) (redisStats, error) {
	text, err := admin.Info(ctx, "commandstats", "cpu").Result()
	if err != nil {
		return redisStats{}, fmt.Errorf("INFO: %w", err)
	}
	return parseStats(text)
}

func parseStats(text string) (redisStats, error) {
	st := redisStats{calls: make(map[string]int64)}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "cmdstat_"):
			calls, err := callsOf(value)
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %w", name, err)
			}
			if cmd := strings.TrimPrefix(name, "cmdstat_"); cmd != "info" {
				st.calls[cmd] = calls
			}
		case name == "used_cpu_sys" || name == "used_cpu_user":
			sec, err := strconv.ParseFloat(value, 64)
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %w", name, err)
			}
			st.cpu += sec
		}
	}
	return st, sc.Err()
}

// callsOf reads N from "calls=N,usec=...".
func callsOf(value string) (int64, error) {
	for field := range strings.SplitSeq(value, ",") {
		if n, ok := strings.CutPrefix(field, "calls="); ok {
			return strconv.ParseInt(n, 10, 64)
		}
	}
	return 0, fmt.Errorf("no calls in %q", value)
}

// since returns the work done between before and s.
func (s redisStats) since(before redisStats) redisStats {
	d := redisStats{calls: make(map[string]int64), cpu: s.cpu - before.cpu}
	for cmd, n := range s.calls {
		if n -= before.calls[cmd]; n > 0 {
			d.calls[cmd] = n
		}
	}
	return d
}

func (s redisStats) commands() int64 {
	var total int64
	for _, n := range s.calls {
		total += n
	}
	return total
}

// breakdown lists the commands per unit of work, most frequent first, e.g.
// "evalsha 2, hget 2, del 1".
func (s redisStats) breakdown(per float64) string {
	cmds := make([]string, 0, len(s.calls))
	for cmd := range s.calls {
		cmds = append(cmds, cmd)
	}
	slices.SortFunc(cmds, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.calls[b], s.calls[a]), strings.Compare(a, b))
	})
	parts := make([]string, len(cmds))
	for i, cmd := range cmds {
		parts[i] = cmd + " " + strconv.FormatFloat(float64(s.calls[cmd])/per, 'g', 3, 64)
	}
	return strings.Join(parts, ", ")
}
