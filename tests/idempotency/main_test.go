package idempotency_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) {
	if runReplica() { // a child process: serves until it is killed
		return
	}
	redistest.QuietLogs()
	goleak.VerifyTestMain(m)
}
