package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is the redis-server process the harness starts for itself.
type server struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	exit chan struct{} // closed when the process has been waited for
}

// startServer starts bin on a free loopback port with no persistence and
// waits until it answers PING. A port taken between choosing and binding
// makes the start fail; it is tried again on another port.
func startServer(ctx context.Context, bin string) (*server, error) {
	var err error
	for range 3 {
		var s *server
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		if s, err = launch(ctx, bin, port); err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, err
}

// launch starts bin on port with no persistence, plus extra arguments,
// and waits until it answers PING.
func launch(ctx context.Context, bin string, port int, extra ...string) (*server, error) {
	dir, err := os.MkdirTemp("", "lockkit-bench-")
	if err != nil {
		return nil, err
	}
	s := &server{
		addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:  dir,
		exit: make(chan struct{}),
	}
	s.cmd = exec.Command(bin, append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--logfile", "redis.log",
	}, extra...)...)
	s.cmd.Dir = dir
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exit)
	}()
	if err := s.waitReady(ctx, 10*time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		s.stop()
		return nil, fmt.Errorf("redis-server on %s: %w\n%s", s.addr, err, log)
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *server) waitReady(ctx context.Context, limit time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(limit)
	for {
		err := rdb.Ping(ctx).Err()
		if err == nil {
			return nil
		}
		select {
		case <-s.exit:
			return errors.New("exited at start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

// stop ends the process by its pid with SIGTERM (SIGKILL after 5 s), waits
// for it and removes its directory. Stopping twice does nothing.
func (s *server) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exit:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exit
	}
	s.cmd = nil
	_ = os.RemoveAll(s.dir)
}
