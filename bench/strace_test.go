package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// asHarness makes the test binary run as the harness, so that -syscalls
// can start it as its traced child.
const asHarness = "LOCKKIT_BENCH_AS_HARNESS"

func TestMain(m *testing.M) {
	if os.Getenv(asHarness) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const straceSample = `syscall              calls
---------------- ---------
futex                 9520
nanosleep             5000
read                  4010
write                 4000
epoll_pwait              7
---------------- ---------
total                22537
`

func TestParseStraceSummary(t *testing.T) {
	c, err := parseStraceSummary(straceSample)
	if err != nil {
		t.Fatal(err)
	}
	if c["futex"] != 9520 || c["epoll_pwait"] != 7 || c.total() != 22537 || len(c) != 5 {
		t.Fatalf("parsed %v", c)
	}
	setUp := syscallCounts{"futex": 20, "read": 10, "mmap": 30}
	per := c.sub(setUp)
	if per.total() != 22537-60 || per["mmap"] != -30 {
		t.Errorf("sub = %v", per)
	}
	if got, want := per.top(3, 1000), "futex 9.50, nanosleep 5.00, read 4.00"; got != want {
		t.Errorf("top = %q, want %q", got, want)
	}
	if got := (syscallCounts{"read": 3}).top(3, 1); got != "read 3.00" {
		t.Errorf("top of one = %q", got)
	}
}

// strace -f notes a thread that ended as it detached inside the summary;
// the note is not a row (seen under load, with two busy loops).
func TestParseStraceSummarySkipsProcessNotes(t *testing.T) {
	text := strings.Replace(straceSample, "read ", "17113 ???( <detached ...>\nread ", 1)
	c, err := parseStraceSummary(text)
	if err != nil || c.total() != 22537 {
		t.Fatalf("parsed %v, %v", c, err)
	}
}

func TestParseStraceSummaryRejectsGarbage(t *testing.T) {
	for _, text := range []string{
		"",                            // strace wrote nothing
		"syscall calls\nread 3\n",     // no total
		"read 3\ntotal 4\n",           // does not add up
		"read x\ntotal 0\n",           // not a number
		"% time seconds usecs/call\n", // the default columns
		"read 3 1 0.5\ntotal 3\n",
	} {
		if _, err := parseStraceSummary(text); err == nil {
			t.Errorf("parseStraceSummary(%q) = nil error", text)
		}
	}
}

// TestTracedChildRunsEveryLibrary runs what -syscalls traces, in this
// process: every library's set-up and a few pairs.
func TestTracedChildRunsEveryLibrary(t *testing.T) {
	srv := startTestServer(t)
	for _, lib := range libraries {
		var stderr bytes.Buffer
		if code := run([]string{"-child", lib.name, "-child-addr", srv.addr, "-pairs", "3"}, io.Discard, &stderr); code != 0 {
			t.Errorf("%s: exit %d: %s", lib.name, code, stderr.String())
		}
	}
	var stderr bytes.Buffer
	if code := run([]string{"-child", "nosuch", "-child-addr", srv.addr, "-pairs", "0"}, io.Discard, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), `"nosuch": no such library`) {
		t.Errorf("an unknown library: exit %d, %q", code, stderr.String())
	}
}

func TestSyscallsNeedsStrace(t *testing.T) {
	cfg, err := parseFlags([]string{"-syscalls", "-strace", "/nonexistent/strace"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	err = countSyscalls(context.Background(), cfg, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "strace, which is missing") {
		t.Fatalf("countSyscalls without strace = %v, want an error saying strace is missing", err)
	}
}

// TestSyscallsCountsEveryLibrary runs -syscalls end to end with strace, or
// checks that it fails clearly where strace is missing.
func TestSyscallsCountsEveryLibrary(t *testing.T) {
	requireRedisServer(t)
	t.Setenv(asHarness, "1") // the traced children are this test binary
	var out, progress bytes.Buffer
	code := run([]string{"-syscalls", "-pairs", "200"}, &out, &progress)
	if _, err := exec.LookPath("strace"); err != nil {
		if code != 1 || !strings.Contains(progress.String(), "strace, which is missing") {
			t.Fatalf("without strace: exit %d, %q", code, progress.String())
		}
		return
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, progress.String())
	}
	// Every library does 2 round trips per pair: at least a write and a
	// read each.
	row := regexp.MustCompile(`(?m)^\| (\w+) \| 200 \| [\d,]+ \| [\d,]+ \| ([\d.]+) \| \w+ [\d.]+, `)
	rows := row.FindAllStringSubmatch(out.String(), -1)
	if len(rows) != len(libraries) {
		t.Fatalf("%d rows, want one per library:\n%s", len(rows), out.String())
	}
	for i, r := range rows {
		per, err := strconv.ParseFloat(r[2], 64)
		if r[1] != libraries[i].name || err != nil || per < 4 {
			t.Errorf("row %q: want %s with ≥ 4 system calls per pair", r[0], libraries[i].name)
		}
	}
}
