package leader_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// The examples' Redis: a redis-server started on a free loopback port
// for the first example that asks for it, stopped by TestMain.
var example struct {
	once sync.Once
	addr string
	cmd  *exec.Cmd
}

// exampleRedis returns the address of the examples' Redis, starting it
// if needed; it panics when redis-server cannot start.
func exampleRedis() string {
	example.once.Do(func() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		example.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
		if err := cmd.Start(); err != nil {
			panic("the examples need redis-server on PATH: " + err.Error())
		}
		example.cmd = cmd
		rdb := redis.NewClient(&redis.Options{Addr: example.addr})
		defer rdb.Close()
		for deadline := time.Now().Add(10 * time.Second); rdb.Ping(context.Background()).Err() != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				panic("the examples' redis-server does not answer")
			}
		}
	})
	return example.addr
}

// stopExampleRedis stops the examples' Redis, if it was started.
func stopExampleRedis() {
	if example.cmd != nil {
		_ = example.cmd.Process.Signal(syscall.SIGTERM)
		_ = example.cmd.Wait()
	}
	_ = os.Stdout.Sync()
}
