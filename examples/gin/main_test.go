package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run("", "", &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 ||
		!strings.HasPrefix(lines[0], `409 Conflict, Retry-After "1": {"type":"about:blank"`) ||
		lines[1] != `200 OK, Retry-After "": paid order 42` {
		t.Fatalf("output:\n%s", out.String())
	}
}
