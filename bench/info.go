package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// redisStats is what Redis reports about the work it did: calls and
// microseconds per command (INFO commandstats, which counts the commands
// scripts run too, by their own name and again in the time of the script's
// EVALSHA) and its CPU time in seconds (INFO cpu, used_cpu_sys +
// used_cpu_user). Commands are named as INFO names them, such as "evalsha"
// or "client|setinfo".
type redisStats struct {
	calls map[string]int64
	usec  map[string]int64
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
	st := redisStats{calls: make(map[string]int64), usec: make(map[string]int64)}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(name, "cmdstat_"):
			calls, err := fieldOf(value, "calls")
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %w", name, err)
			}
			usec, err := fieldOf(value, "usec")
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %w", name, err)
			}
			if cmd := strings.TrimPrefix(name, "cmdstat_"); cmd != "info" {
				st.calls[cmd], st.usec[cmd] = calls, usec
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

// fieldOf reads N from name=N in "a=1,b=2,...".
func fieldOf(value, name string) (int64, error) {
	for field := range strings.SplitSeq(value, ",") {
		if n, ok := strings.CutPrefix(field, name+"="); ok {
			return strconv.ParseInt(n, 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in %q", name, value)
}

// since returns the work done between before and s.
func (s redisStats) since(before redisStats) redisStats {
	d := redisStats{calls: make(map[string]int64), usec: make(map[string]int64), cpu: s.cpu - before.cpu}
	for cmd, n := range s.calls {
		if n -= before.calls[cmd]; n > 0 {
			d.calls[cmd], d.usec[cmd] = n, s.usec[cmd]-before.usec[cmd]
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
	cmds := s.byCalls()
	parts := make([]string, len(cmds))
	for i, cmd := range cmds {
		parts[i] = cmd + " " + strconv.FormatFloat(float64(s.calls[cmd])/per, 'g', 3, 64)
	}
	return strings.Join(parts, ", ")
}

// usecEach lists every command's usec per call, most frequent first, e.g.
// "evalsha 19.1, hget 0.4": a script's commands counted by their own
// names (and again in the script's).
func (s redisStats) usecEach() string {
	cmds := s.byCalls()
	parts := make([]string, len(cmds))
	for i, cmd := range cmds {
		parts[i] = cmd + " " + strconv.FormatFloat(float64(s.usec[cmd])/float64(s.calls[cmd]), 'f', 2, 64)
	}
	return strings.Join(parts, ", ")
}

// byCalls returns the commands, most calls first.
func (s redisStats) byCalls() []string {
	cmds := make([]string, 0, len(s.calls))
	for cmd := range s.calls {
		cmds = append(cmds, cmd)
	}
	slices.SortFunc(cmds, func(a, b string) int {
		return cmp.Or(cmp.Compare(s.calls[b], s.calls[a]), strings.Compare(a, b))
	})
	return cmds
}

// memSample is what INFO memory and keyspace say at one moment:
// used_memory, and the keys (DBSIZE, summed over the databases) and the
// keys among them with an expiry.
type memSample struct {
	used          int64
	keys, expires int64
}

// noTTL is how many keys have no expiry.
func (m memSample) noTTL() int64 { return m.keys - m.expires }

// readMemory asks Redis through admin, whose commands no scenario counts.
func readMemory(ctx context.Context, admin *redis.Client) (memSample, error) {
	text, err := admin.Info(ctx, "memory", "keyspace").Result()
	if err != nil {
		return memSample{}, fmt.Errorf("INFO: %w", err)
	}
	return parseMemory(text)
}

// parseMemory reads used_memory and the "dbN:keys=K,expires=E,..." lines;
// an empty Redis has none of the latter.
func parseMemory(text string) (memSample, error) {
	var m memSample
	used := false
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		switch {
		case name == "used_memory":
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return memSample{}, fmt.Errorf("INFO used_memory: %w", err)
			}
			m.used, used = n, true
		case strings.HasPrefix(name, "db"):
			keys, err := fieldOf(value, "keys")
			if err != nil {
				return memSample{}, fmt.Errorf("INFO %s: %w", name, err)
			}
			expires, err := fieldOf(value, "expires")
			if err != nil {
				return memSample{}, fmt.Errorf("INFO %s: %w", name, err)
			}
			m.keys += keys
			m.expires += expires
		}
	}
	if err := sc.Err(); err != nil {
		return memSample{}, err
	}
	if !used {
		return memSample{}, errors.New("INFO: no used_memory")
	}
	return m, nil
}
