package otellock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the library on the OpenTelemetry API: the SDK,
// exporters and the other integrations are for tests and programs only.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/lockkit/lockkit/otellock").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	banned := []string{
		"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "go.opentelemetry.io/contrib",
		"github.com/gin-gonic/", "github.com/robfig/cron", "github.com/lockkit/lockkit/ginlock",
		"github.com/lockkit/lockkit/cronlock",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if strings.HasPrefix(pkg, b) {
				t.Errorf("package otellock depends on %s", pkg)
			}
		}
	}
}
