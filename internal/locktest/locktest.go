// Package locktest holds what the tests of lockkit's packages share: a
// real redis-server with direct reads of its data, a lock Client tied to a
// test, a Lock that fails the test, a go-redis hook
// that counts commands, a copy of the test binary run as a child
// process, and a buffer safe to share with a writer.
package locktest

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// NewClient returns a lock Client closed when the test ends.
func NewClient(t testing.TB, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("lock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// MustLock takes key or fails the test.
func MustLock(t testing.TB, l lock.Locker, ctx context.Context, key string, opts ...lock.LockOption) (context.Context, lock.UnlockFunc) {
	t.Helper()
	lctx, unlock, err := l.Lock(ctx, key, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", key, err)
	}
	return lctx, unlock
}

// CommandCounter is a go-redis hook counting the commands a client sends;
// a pipeline counts each of its commands.
type CommandCounter struct{ n atomic.Int64 }

// CountCommands adds a CommandCounter to rdb.
func CountCommands(rdb *redis.Client) *CommandCounter {
	cc := &CommandCounter{}
	rdb.AddHook(cc)
	return cc
}

// N returns the number of commands sent so far.
func (cc *CommandCounter) N() int64 { return cc.n.Load() }

// DialHook implements redis.Hook.
func (cc *CommandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (cc *CommandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		cc.n.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (cc *CommandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		cc.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
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

// TokenWhenLocked takes key with l in a goroutine and sends on the
// returned channel the fencing token it got once it holds key (0 after
// an error, which fails the test), then unlocks.
func TokenWhenLocked(t testing.TB, l lock.Locker, ctx context.Context, key string) <-chan uint64 {
	ch := make(chan uint64, 1)
	go func() {
		lctx, unlock, err := l.Lock(ctx, key)
		if err != nil {
			t.Errorf("Lock(%q): %v", key, err)
			ch <- 0
			return
		}
		tok, _ := lock.FencingToken(lctx, key)
		ch <- tok
		_ = unlock()
	}()
	return ch
}

// Held reports whether the lock hash name (such as "lockkit:{k}") has a
// holder in Redis: a released lock's hash stays a moment, free.
func Held(t testing.TB, rdb redis.Cmdable, name string) bool {
	t.Helper()
	n, err := rdb.HGet(context.Background(), name, "n").Int()
	switch {
	case err == redis.Nil:
		return false
	case err != nil:
		t.Fatalf("HGET %s n: %v", name, err)
	}
	return n > 0
}
