package lock_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	if runChild() {
		return
	}
	// Most tests wait on timers and Redis, not the CPU: run sixteen at a
	// time unless -parallel says otherwise. Tests that load the CPU on
	// purpose do not call t.Parallel; tests asserting time bounds run alone
	// with LOCKKIT_TIMING=1 (see locktest.Timed); tests checking the
	// goroutines of the whole process run in a process of their own (see
	// locktest.OwnProcess). LOCKKIT_TIMING=1 checks time bounds as
	// written: eight at a time then (they mostly wait on timers; the tests
	// that load the CPU run alone).
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		n := "16"
		if locktest.Tight() {
			n = "8"
		}
		_ = f.Value.Set(n)
	}
	goleak.VerifyTestMain(m)
}
