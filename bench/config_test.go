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
		{[]string{"-scenarios", "1,10"}, `"10" is not a scenario`},
		{[]string{"-scenarios", "0"}, `"0" is not a scenario`},
		{[]string{"-memkeys", "0"}, "-memkeys 0"},
		{[]string{"-sharehold", "0s"}, "-sharehold 0s"},
		{[]string{"-syscalls", "-pairs", "0"}, "-pairs 0"},
		{[]string{"-child", "floor"}, "-child needs -child-addr"},
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
	if cfg.rounds != 1 || cfg.locks != 1000 || cfg.hold != 300*time.Millisecond || cfg.memKeys != 2000 {
		t.Errorf("smoke defaults not applied: %+v", cfg)
	}
	if cfg.run != 2*time.Second {
		t.Errorf("-run 2s overridden by -smoke: got %v", cfg.run)
	}
	if !cfg.scenarios[2] || !cfg.scenarios[5] || cfg.scenarios[1] {
		t.Errorf("scenarios = %v, want 2 and 5", cfg.scenarios)
	}
}

func TestScenariosSixSevenAndNineOnlyWhenNamed(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		six, sev, nin bool
		memKeys       int
	}{
		{nil, false, false, false, 1_000_000},
		{[]string{"-scenarios", "7"}, false, true, false, 1_000_000},
		{[]string{"-scenarios", "9"}, false, false, true, 1_000_000},
		{[]string{"-scenarios", "7", "-memkeys", "100000"}, false, true, false, 100_000},
		{[]string{"-smoke"}, true, true, true, 2000},
		{[]string{"-smoke", "-memkeys", "500"}, true, true, true, 500},
	} {
		cfg, err := parseFlags(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("parseFlags(%q): %v", tc.args, err)
		}
		if cfg.scenarios[6] != tc.six || cfg.scenarios[7] != tc.sev || cfg.scenarios[9] != tc.nin || cfg.memKeys != tc.memKeys {
			t.Errorf("parseFlags(%q): scenarios %v, -memkeys %d; want 6: %v, 7: %v, 9: %v, -memkeys %d",
				tc.args, cfg.scenarios, cfg.memKeys, tc.six, tc.sev, tc.nin, tc.memKeys)
		}
	}
}

func TestScenarioEightRunsByDefaultAndInSmoke(t *testing.T) {
	for _, args := range [][]string{nil, {"-smoke"}} {
		cfg, err := parseFlags(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.scenarios[8] {
			t.Errorf("parseFlags(%q): scenarios %v, want 8 among them", args, cfg.scenarios)
		}
	}
}
