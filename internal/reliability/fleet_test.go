package reliability_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// child is a worker process: this test binary, re-executed with a
// configuration in an environment variable so that TestMain runs the
// worker instead of the tests. Its stdout is read line by line.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr bytes.Buffer
	exited chan struct{} // closed when stdout is read to the end and the process waited for
	err    error         // the exit status, once exited is closed
}

// startChild starts a worker with env set to cfg as JSON, calling onLine
// for each line it writes on stdout. The worker is killed, if still
// running, when the test ends.
func startChild(t *testing.T, env string, cfg any, onLine func([]byte)) *child {
	t.Helper()
	js, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(js))
	c := &child{cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			onLine(sc.Bytes())
		}
		_, _ = io.Copy(io.Discard, stdout) // after a scan error, let the worker finish
		c.err = cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.kill()
		<-c.exited
	})
	return c
}

// kill ends the worker by its pid, continuing it first in case it was
// stopped. It does nothing once the worker has exited.
func (c *child) kill() {
	_ = c.cmd.Process.Signal(syscall.SIGCONT)
	_ = c.cmd.Process.Kill()
}

// fleet is a set of workers running the critical-section workload.
type fleet struct {
	children []*child
	long     chan record   // "long" records, as they arrive
	done     chan struct{} // closed when every worker has exited

	mu      sync.Mutex
	records []record
	garbled [][]byte // lines that were not records
}

// startFleet starts one worker per configuration.
func startFleet(t *testing.T, cfgs []workerConfig) *fleet {
	t.Helper()
	f := &fleet{long: make(chan record, len(cfgs)), done: make(chan struct{})}
	for _, cfg := range cfgs {
		f.children = append(f.children, startChild(t, workerEnv, cfg, f.add))
	}
	go func() {
		for _, c := range f.children {
			<-c.exited
		}
		close(f.done)
	}()
	return f
}

func (f *fleet) add(line []byte) {
	var rec record
	if err := json.Unmarshal(line, &rec); err != nil {
		f.mu.Lock()
		f.garbled = append(f.garbled, bytes.Clone(line))
		f.mu.Unlock()
		return
	}
	if rec.Kind == "long" {
		f.long <- rec
		return
	}
	f.mu.Lock()
	f.records = append(f.records, rec)
	f.mu.Unlock()
}

// wait waits up to limit for the workers to exit, fails the test if one
// failed, and returns their records.
func (f *fleet) wait(t *testing.T, limit time.Duration) []record {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(limit):
		for _, c := range f.children {
			c.kill()
		}
		<-f.done
		t.Errorf("workers still running after %v: killed", limit)
	}
	for i, c := range f.children {
		if c.err != nil {
			t.Errorf("worker %d: %v\n%s", i, c.err, c.stderr.Bytes())
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, line := range f.garbled {
		t.Errorf("worker wrote %q", line)
	}
	if t.Failed() {
		t.FailNow()
	}
	return f.records
}
