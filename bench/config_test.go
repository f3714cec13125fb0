package main

import (
	"io"
	"strings"
	"testing"
	"time"
)

func TestParseFlagsRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-rounds", "0"}, "-rounds 0"},
		{[]string{"-run", "0s"}, "-run 0s"},
		{[]string{"-hold", "-1s"}, "-hold -1s"},
		{[]string{"-locks", "1"}, "-locks 1"},
		{[]string{"-hold", "10s"}, "must be shorter than -lease 8s"},
		{[]string{"-scenarios", "1,7"}, `"7" is not a scenario`},
		{[]string{"-scenarios", ""}, `"" is not a scenario`},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-nosuchflag"}, "not defined"},
	} {
		_, err := parseFlags(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestSmokeDefaultsYieldToFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-smoke", "-run", "2s", "-scenarios", "2,5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.rounds != 1 || cfg.locks != 1000 || cfg.hold != 300*time.Millisecond {
		t.Errorf("smoke defaults not applied: %+v", cfg)
	}
	if cfg.run != 2*time.Second {
		t.Errorf("-run 2s overridden by -smoke: got %v", cfg.run)
	}
	if !cfg.scenarios[2] || !cfg.scenarios[5] || cfg.scenarios[1] {
		t.Errorf("scenarios = %v, want 2 and 5", cfg.scenarios)
	}
}
