package otellock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
)

// The tests that need the OpenTelemetry SDK are in tests/otellock, a module
// of its own, so that the SDK never reaches a module depending on lockkit.
func TestMain(m *testing.M) {
	redistest.QuietLogs()
	goleak.VerifyTestMain(m)
}
