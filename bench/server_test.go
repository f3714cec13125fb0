package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// startTestServer starts redis-server for a test, stopped at its end. It
// skips without the binary, unless LOCKKIT_REQUIRE_REDIS=1.
func startTestServer(t *testing.T) *server {
	t.Helper()
	requireRedisServer(t)
	s, err := startServer(context.Background(), "redis-server")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.stop)
	return s
}

func TestServerStopsByPid(t *testing.T) {
	s := startTestServer(t)
	pid := s.cmd.Process.Pid
	s.stop()
	select {
	case <-s.exit:
	default:
		t.Fatalf("redis-server (pid %d) still running after stop", pid)
	}
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s left behind (%v)", s.dir, err)
	}
	s.stop() // a second stop does nothing
}

// requireRedisServer skips the test when redis-server is not on PATH,
// unless LOCKKIT_REQUIRE_REDIS=1, which makes it fail.
func requireRedisServer(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("LOCKKIT_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server is required (LOCKKIT_REQUIRE_REDIS=1): %v", err)
		}
		t.Skip("redis-server not found on PATH")
	}
}
