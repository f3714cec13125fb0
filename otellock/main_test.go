package otellock_test

import (
	"testing"

	"go.uber.org/goleak"
)

// The tests that need the OpenTelemetry SDK are in tests/otellock, a module
// of its own, so that the SDK never reaches a module depending on lockkit.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
