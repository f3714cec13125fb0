package lock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// Child processes of the tests: the test binary run again with an
// environment variable (locktest.StartChild) becomes a process that holds,
// waits or releases once, and never runs the tests.

// runChild runs the child process its environment asks for, if any, and
// reports whether it did.
func runChild() bool {
	if addr := os.Getenv("LOCKKIT_CHILD_HOLD"); addr != "" {
		holdForever(addr)
		return true
	}
	if v := os.Getenv("LOCKKIT_CHILD_WAIT"); v != "" {
		waitForever(v)
		return true
	}
	if v := os.Getenv("LOCKKIT_PROBE_RELEASER"); v != "" {
		releaseOnce(v)
		return true
	}
	return false
}

// releaseOnce is the child process of TestLiveWaiterGetsKeyWhenReleaserEnds:
// v is "addr,key". It takes key, says "held", waits for a line on stdin,
// unlocks, says "released <err>" and exits at once, as a process that
// crashes (or exits without Close) right after its last unlock.
func releaseOnce(v string) {
	addr, key, _ := strings.Cut(v, ",")
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lock.New(rdb)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	_, unlock, err := c.Lock(context.Background(), key, lock.WithLease(holderLease))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	err = unlock()
	fmt.Println("released", err)
	os.Exit(0)
}

// holdForever is the child process of TestCrashFreesKey: it takes the key
// with a 1 s lease, says so on stdout, and keeps it until it is killed.
func holdForever(addr string) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Second))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if _, _, err := c.Lock(context.Background(), "crash"); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("held")
	select {}
}

// waitForever is the child process of TestKilledProcessesWaitersHoldUpKeyTwoWindowsAtMost:
// v is "addr,key,n,want". It queues n Lock calls of key, says "queued" on
// stdout once the key's queue in Redis has at least want waiters (those of
// earlier children included), and waits until it is killed.
func waitForever(v string) {
	var addr, key string
	var n, want int64
	if _, err := fmt.Sscanf(strings.ReplaceAll(v, ",", " "), "%s %s %d %d", &addr, &key, &n, &want); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lock.New(rdb)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for range n {
		go func() { _, _, _ = c.Lock(context.Background(), key) }()
	}
	for rdb.LLen(context.Background(), "lockkit:{"+key+"}:queue").Val() < want {
		time.Sleep(2 * time.Millisecond)
	}
	fmt.Println("queued")
	select {}
}
