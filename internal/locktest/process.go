package locktest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ownProcessEnv names the test a child test binary runs on its own.
const ownProcessEnv = "LOCKKIT_OWN_PROCESS"

// OwnProcess runs the calling top-level test in a child process of its
// own, so that what it checks of the whole process (no goroutine left
// behind) is not disturbed by the tests running beside it, while the
// parent test runs in parallel with the others.
//
// In the parent it marks t parallel, runs the test binary again with only
// this test, fails t with the child's output when the child fails (skips
// it when the child skips), and returns false: the caller returns. In the
// child it returns true: the caller runs the test's body.
//
//	if !locktest.OwnProcess(t) {
//		return
//	}
func OwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownProcessEnv) == t.Name() {
		return true
	}
	t.Parallel()
	runOwnProcess(t)
	return false
}

// OwnProcessTimed is OwnProcess for a test whose assertions are tight
// upper bounds on elapsed time: the parent runs as [Timed] says (alone
// with LOCKKIT_TIMING=1).
func OwnProcessTimed(t *testing.T) bool {
	t.Helper()
	if os.Getenv(ownProcessEnv) == t.Name() {
		return true
	}
	Timed(t)
	runOwnProcess(t)
	return false
}

// runOwnProcess runs t's test in a child test binary and reports its
// outcome on t.
func runOwnProcess(t *testing.T) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ownProcessEnv+"="+t.Name())
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	switch {
	case err != nil:
		t.Errorf("%s in a process of its own: %v\n%s", t.Name(), err, out.String())
	case strings.Contains(out.String(), "--- SKIP: "+t.Name()):
		t.Skipf("%s in a process of its own was skipped:\n%s", t.Name(), out.String())
	case !strings.Contains(out.String(), "--- PASS: "+t.Name()):
		t.Errorf("%s in a process of its own did not run:\n%s", t.Name(), out.String())
	default:
		t.Logf("%s in a process of its own:\n%s", t.Name(), out.String())
	}
}

// StartChild runs the test binary again, running no test, with env (a
// NAME=value pair its TestMain acts on), and waits for the child's first
// line on stdout (30 s at most), failing the test unless it is ready. The
// child is killed when the test ends.
func StartChild(t testing.TB, env, ready string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	type read struct {
		line string
		err  error
	}
	got := make(chan read, 1)
	go func() {
		line, err := bufio.NewReader(out).ReadString('\n')
		got <- read{line, err}
	}()
	select {
	case r := <-got:
		if r.err != nil || r.line != ready+"\n" {
			t.Fatalf("child process (%s): %q %v, want %q", env, r.line, r.err, ready)
		}
	case <-time.After(childReady):
		_ = cmd.Process.Kill() // ends the read above
		t.Fatalf("child process (%s): not %q within %v", env, ready, childReady)
	}
	return cmd
}

// childReady bounds the wait for a child's first line: generous, since a
// loaded machine starts the test binary slowly, but a child that never
// gets ready (its lock taken instead of queued) fails the test instead of
// hanging it.
const childReady = 30 * time.Second
