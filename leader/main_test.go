package leader_test

import (
	"flag"
	"testing"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
)

// TestMain runs a child process of the fault tests when the environment
// asks for one (children_test.go), and otherwise the tests, then checks
// that none left a goroutine behind.
func TestMain(m *testing.M) {
	redistest.QuietLogs()
	if runChild() {
		return
	}
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("8") // the tests wait on timers and Redis, not the CPU
	}
	goleak.VerifyTestMain(m)
}
