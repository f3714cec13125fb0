package scripts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// A callgrind counts the instructions a redis-server under Valgrind runs
// inside EVALSHA: unlike time, the count does not change with the load
// of the machine. Start the server as
//
//	valgrind --tool=callgrind --toggle-collect=evalShaCommand \
//	  --callgrind-out-file=/tmp/cg/out.%p redis-server --port 16399 --save ''
//
// and run BenchmarkScriptCost with LOCKKIT_CALLGRIND=<pid>:/tmp/cg/out and
// LOCKKIT_REDIS_ADDR=127.0.0.1:16399.
type callgrind struct {
	pid string
	out string // the dumps' path, less ".<pid>.<n>"
}

// callgrindFromEnv returns the callgrind LOCKKIT_CALLGRIND names, or nil.
func callgrindFromEnv() *callgrind {
	pid, out, ok := strings.Cut(os.Getenv("LOCKKIT_CALLGRIND"), ":")
	if !ok {
		return nil
	}
	return &callgrind{pid: pid, out: out}
}

// zero sets the server's counts to zero.
func (cg *callgrind) zero() error {
	return exec.Command("callgrind_control", "-z", cg.pid).Run()
}

// dump returns the instructions counted since zero.
func (cg *callgrind) dump() (int64, error) {
	if err := exec.Command("callgrind_control", "-d", cg.pid).Run(); err != nil {
		return 0, err
	}
	files, err := filepath.Glob(cg.out + "." + cg.pid + ".*")
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no dump at %s.%s.*: %v", cg.out, cg.pid, err)
	}
	last, seq := "", -1
	for _, f := range files {
		if n, err := strconv.Atoi(f[strings.LastIndex(f, ".")+1:]); err == nil && n > seq {
			last, seq = f, n
		}
	}
	b, err := os.ReadFile(last)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "summary: "); ok {
			return strconv.ParseInt(strings.Fields(v)[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s: no summary line", last)
}
