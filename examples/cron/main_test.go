package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// TestRun runs the example for 2.5 s (against REDIS_URL if set): every
// tick that ran, ran on one replica.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(os.Getenv("REDIS_URL"), 2500*time.Millisecond, &out); err != nil {
		t.Fatal(err)
	}
	ran := make(map[string]int) // tick -> runs
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		tick, rest, ok := strings.Cut(line, " replica ")
		if !ok {
			t.Fatalf("unexpected line %q", line)
		}
		if strings.HasSuffix(rest, ": ran") {
			ran[tick]++
		}
	}
	if len(ran) == 0 {
		t.Fatalf("no run:\n%s", out.String())
	}
	for tick, n := range ran {
		if n != 1 {
			t.Errorf("tick %s ran %d times:\n%s", tick, n, out.String())
		}
	}
}
