package leader_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
)

// TestMain runs a child process of the fault tests when the environment
// asks for one (children_test.go), and otherwise the tests, then checks
// that no goroutine was left behind.
func TestMain(m *testing.M) {
	redistest.QuietLogs()
	if runChild() {
		return
	}
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		_ = f.Value.Set("8") // the tests wait on timers and Redis, not the CPU
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
