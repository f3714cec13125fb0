package lock_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	if addr := os.Getenv("LOCKKIT_CHILD_HOLD"); addr != "" {
		holdForever(addr)
		return
	}
	if v := os.Getenv("LOCKKIT_CHILD_WAIT"); v != "" {
		waitForever(v)
		return
	}
	// Most tests wait on timers and Redis, not the CPU: run sixteen at a
	// time unless -parallel says otherwise. Tests that load the CPU on
	// purpose do not call t.Parallel; tests asserting time bounds run alone
	// with LOCKKIT_TIMING=1 (see locktest.Timed); tests checking the
	// goroutines of the whole process run in a process of their own (see
	// locktest.OwnProcess).
	// LOCKKIT_TIMING=1 checks time bounds as written: four at a time then.
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil && f.Value.String() == f.DefValue {
		n := "16"
		if locktest.Tight() {
			n = "4"
		}
		_ = f.Value.Set(n)
	}
	goleak.VerifyTestMain(m)
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

// waitForever is the child process of TestDeadProcessesStallAFreeKey:
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

// newReal starts a real redis-server for the test (see redistest).
func newReal(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, srv.Client(t)
}

var keySeq atomic.Int64

// randKey returns a key no other caller in this process gets.
func randKey() string { return strconv.FormatInt(keySeq.Add(1), 10) }
