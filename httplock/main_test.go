package httplock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/redistest"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	goleak.VerifyTestMain(m)
}
