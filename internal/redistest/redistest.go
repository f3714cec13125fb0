// Package redistest starts real redis-server processes on free loopback
// ports for tests, and stops them by pid when the test ends.
//
// Without a redis-server binary on PATH the test is skipped with a message,
// unless LOCKKIT_REQUIRE_REDIS=1 is set (as CI does): then it fails.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process.
type Server struct {
	Addr string // 127.0.0.1:port
	Port int

	tb   testing.TB
	bin  string
	dir  string
	conf string // a config file, first argument (Sentinel rewrites its own)
	args []string
	cmd  *exec.Cmd
	exit chan struct{} // closed when cmd has been waited for
}

// Binary returns the path of redis-server, skipping or failing tb when
// there is none (see the package comment).
func Binary(tb testing.TB, name string) string {
	tb.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("LOCKKIT_REQUIRE_REDIS") == "1" {
		tb.Fatalf("%s is required (LOCKKIT_REQUIRE_REDIS=1) but not found: %v", name, err)
	}
	tb.Skipf("%s not found on PATH; install it (Debian: apt-get install redis-server) to run this test", name)
	return ""
}

// Start starts redis-server on a free loopback port with no persistence,
// plus extra config args (such as "--cluster-enabled", "yes"), and waits
// until it answers PING. It is stopped when the test ends.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb, "redis-server"), dir: tb.TempDir(), args: args}
	s.Port = FreePort(tb)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

// StartSentinel starts a Redis Sentinel on a free loopback port that
// monitors the primary at primary as name, with a quorum of 1, and
// declares it down after downAfter without an answer. It is stopped when
// the test ends.
func StartSentinel(tb testing.TB, name string, primary *Server, downAfter time.Duration) *Server {
	tb.Helper()
	s := &Server{tb: tb, bin: Binary(tb, "redis-server"), dir: tb.TempDir()}
	s.Port = FreePort(tb)
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port))
	s.conf = s.dir + "/sentinel.conf"
	conf := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 1\nsentinel down-after-milliseconds %[1]s %[3]d\nsentinel failover-timeout %[1]s 5000\n",
		name, primary.Port, downAfter.Milliseconds())
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	s.args = []string{"--sentinel"}
	s.start()
	tb.Cleanup(s.Stop)
	return s
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start() {
	s.tb.Helper()
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(append(args,
		"--port", strconv.Itoa(s.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--logfile", "redis.log",
	), s.args...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Dir = s.dir
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	s.exit = make(chan struct{})
	go func(cmd *exec.Cmd, exit chan struct{}) {
		_ = cmd.Wait()
		close(exit)
	}(s.cmd, s.exit)
	if err := s.waitReady(10 * time.Second); err != nil {
		log, _ := os.ReadFile(s.dir + "/redis.log")
		s.Stop()
		s.tb.Fatalf("redis-server on %s: %v\n%s", s.Addr, err, log)
	}
}

func (s *Server) waitReady(limit time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(limit)
	for {
		err := rdb.Ping(context.Background()).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.exit:
			return fmt.Errorf("exited: %v", s.cmd.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop ends the server with SIGTERM (SIGKILL after 5 s) and waits for it.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // in case it was paused
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exit:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
}

// Restart stops the server and starts a new one on the same port. With no
// persistence, the new server starts empty.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.start()
}

// Pause freezes the server with SIGSTOP; Resume continues it.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Client returns a go-redis client of the server, closed when the test
// ends. With LOCKKIT_CONTEXT_TIMEOUT=1 in the environment it has go-redis's
// ContextTimeoutEnabled, under which a lock Client sends a lone call on
// its caller's goroutine: the suites run once each way.
func (s *Server) Client(tb testing.TB) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, ContextTimeoutEnabled: ContextTimeout()})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// ContextTimeout reports whether LOCKKIT_CONTEXT_TIMEOUT=1 asks for clients
// with go-redis's ContextTimeoutEnabled (see Server.Client).
func ContextTimeout() bool { return os.Getenv("LOCKKIT_CONTEXT_TIMEOUT") == "1" }
