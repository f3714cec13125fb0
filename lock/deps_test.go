package lock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the core free of the integrations: package
// lock imports go-redis, the standard library and its own internal
// packages, never gin, cron, OpenTelemetry or lockkit's other packages.
func TestDependencyDirection(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/lockkit/lockkit/lock").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/gin-gonic/", "github.com/robfig/cron", "go.opentelemetry.io/", "github.com/lockkit/lockkit/"} {
			if strings.HasPrefix(pkg, banned) && pkg != "github.com/lockkit/lockkit/lock" && !strings.HasPrefix(pkg, "github.com/lockkit/lockkit/lock/internal/") {
				t.Errorf("package lock depends on %s", pkg)
			}
		}
	}
}
