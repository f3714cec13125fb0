package readme_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/lockkit/lockkit/otellock"
)

// Facts the documentation states that the code or the module decides: a
// test fails when one side changes without the other.

func TestREADMEGoVersionIsGoMod(t *testing.T) {
	goMod, readme := read(t, "../../go.mod"), read(t, "../../README.md")
	directive := regexp.MustCompile(`(?m)^go (\S+)$`).FindStringSubmatch(goMod)
	if directive == nil {
		t.Fatal("go.mod has no go directive")
	}
	stated := regexp.MustCompile(`Go (\d+\.\d+(?:\.\d+)?) or newer`).FindStringSubmatch(readme)
	if stated == nil || stated[1] != directive[1] {
		t.Errorf("README.md states %v, go.mod requires go %s", stated, directive[1])
	}
}

// TestMetricsListedAreTheInstruments: docs/guide.md's list of metrics and the
// table of docs/observability.md name exactly the instruments otellock
// creates.
func TestMetricsListedAreTheInstruments(t *testing.T) {
	var created []string
	if _, err := otellock.New(otellock.WithMeterProvider(namingProvider{names: &created})); err != nil {
		t.Fatal(err)
	}
	slices.Sort(created)

	guide := read(t, "../../docs/guide.md")
	bullet := regexp.MustCompile(`(?s)\*\*Metrics\*\*(.*?)\n- `).FindStringSubmatch(guide)
	if bullet == nil {
		t.Fatal("docs/guide.md has no **Metrics** bullet")
	}
	metricName := regexp.MustCompile("`(lock\\.[a-z._]+)`")
	var listed []string
	for _, m := range metricName.FindAllStringSubmatch(bullet[1], -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(listed)
	if !slices.Equal(listed, created) {
		t.Errorf("docs/guide.md lists metrics %v, otellock creates %v", listed, created)
	}

	var tabled []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(lock\\.[a-z._]+)` \\| [a-z -]*(histogram|counter)").
		FindAllStringSubmatch(read(t, "../../docs/observability.md"), -1) {
		tabled = append(tabled, m[1])
	}
	slices.Sort(tabled)
	if !slices.Equal(tabled, created) {
		t.Errorf("docs/observability.md's table has metrics %v, otellock creates %v", tabled, created)
	}
}

// TestAttributesAreDocumented: every attribute key otellock declares is
// described in docs/observability.md.
func TestAttributesAreDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../../otellock/attributes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) != 1 {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "Key" {
			return true
		}
		if lit, ok := call.Args[0].(*ast.BasicLit); ok {
			key, _ := strconv.Unquote(lit.Value)
			keys = append(keys, key)
		}
		return true
	})
	if len(keys) < 5 {
		t.Fatalf("found only %v in otellock/attributes.go", keys)
	}
	doc := read(t, "../../docs/observability.md")
	for _, k := range append(keys, "error.type") {
		if !strings.Contains(doc, "`"+k+"`") {
			t.Errorf("docs/observability.md does not describe attribute %s", k)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// namingProvider's meters note the name of every instrument made.
type namingProvider struct {
	metricnoop.MeterProvider
	names *[]string
}

func (p namingProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	return namingMeter{names: p.names}
}

type namingMeter struct {
	metricnoop.Meter
	names *[]string
}

func (m namingMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	*m.names = append(*m.names, name)
	return m.Meter.Float64Histogram(name, opts...)
}

func (m namingMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	*m.names = append(*m.names, name)
	return m.Meter.Int64Counter(name, opts...)
}

func (m namingMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	*m.names = append(*m.names, name)
	return m.Meter.Int64UpDownCounter(name, opts...)
}
