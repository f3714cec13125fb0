package reliability_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/lockkit/lockkit/internal/redistest"
)

// The test binary runs as a worker process when one of these variables is
// set; the parent test passes the worker's configuration in it as JSON.
const (
	workerEnv = "LOCKKIT_RELIABILITY_WORKER"
	pauseEnv  = "LOCKKIT_RELIABILITY_PAUSE"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	if cfg := os.Getenv(workerEnv); cfg != "" {
		exitWith(runJSON(cfg, runWorker))
	}
	if cfg := os.Getenv(pauseEnv); cfg != "" {
		exitWith(runJSON(cfg, runPaused))
	}
	// toxiproxy v2.5.0 can leave a toxic's goroutine blocked for good when a
	// toxic is added to or removed from a connection that is closing. It
	// belongs to the fault injector, not to lockkit.
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/Shopify/toxiproxy/v2/toxics.(*ToxicStub).Run"))
}

func exitWith(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runJSON decodes a worker's configuration and runs the worker.
func runJSON[C any](s string, run func(C) error) error {
	var cfg C
	if err := json.Unmarshal([]byte(s), &cfg); err != nil {
		return fmt.Errorf("config %q: %w", s, err)
	}
	return run(cfg)
}

// now reads CLOCK_MONOTONIC in nanoseconds. It is one clock for every
// process on the machine, so times taken by workers and by the test
// compare directly.
func now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}

// ms formats a CLOCK_MONOTONIC difference.
func ms(ns int64) string { return fmt.Sprintf("%.1f ms", float64(ns)/1e6) }
