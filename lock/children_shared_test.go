package lock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// Child processes of the review33 tests: the test binary run again with
// LOCKKIT_SHARED_CHILD="<what> <addr> <key> <limit> <lease ms> <want>"
// (locktest.StartChild) takes or waits for a shared hold of key and never
// runs the tests. what is hold-p (a permit of limit), hold-r (a read
// hold), wait-p, wait-r or wait-w (a Lock); a holder says "held" once it
// holds; a waiter queues calls one by one until key's queue in Redis has
// want waiters, then says "queued". Either then waits until it is
// killed; a holder whose context ends pushes its cause onto the list
// sharedEvents(key), a waiter "got <error>" once its call returns. init runs
// it before TestMain, so this needs no change to the package's TestMain.
func init() {
	if v := os.Getenv("LOCKKIT_SHARED_CHILD"); v != "" {
		sharedChild(v)
		os.Exit(0)
	}
}

// sharedChildEnv is the environment of a review33 child process.
func sharedChildEnv(what, addr, key string, limit int, lease time.Duration, want int) string {
	return fmt.Sprintf("LOCKKIT_SHARED_CHILD=%s %s %s %d %d %d", what, addr, key, limit, lease.Milliseconds(), want)
}

// sharedEvents is the list where a child holder of key tells how its hold
// ended.
func sharedEvents(key string) string { return "shared:" + key + ":events" }

func sharedChild(v string) {
	f := strings.Fields(v)
	if len(f) != 6 {
		fmt.Println("error: bad LOCKKIT_SHARED_CHILD", v)
		os.Exit(1)
	}
	what, addr, key := f[0], f[1], f[2]
	limit, _ := strconv.Atoi(f[3])
	ms, _ := strconv.Atoi(f[4])
	want, _ := strconv.Atoi(f[5])
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := lock.New(rdb, lock.WithDefaultLease(time.Duration(ms)*time.Millisecond))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	take := func() (context.Context, error) {
		var lctx context.Context
		var err error
		switch what[len(what)-1] {
		case 'p':
			lctx, _, err = c.Acquire(context.Background(), key, limit)
		case 'w':
			lctx, _, err = c.Lock(context.Background(), key)
		default:
			lctx, _, err = c.RLock(context.Background(), key)
		}
		return lctx, err
	}
	if strings.HasPrefix(what, "hold") {
		lctx, err := take()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		go func() { // tells the test how the hold ended, if it does
			<-lctx.Done()
			rdb.RPush(context.Background(), sharedEvents(key), fmt.Sprint(context.Cause(lctx)))
		}()
		fmt.Println("held")
		select {}
	}
	queue := func() int64 { return rdb.LLen(context.Background(), "lockkit:{"+key+"}:queue").Val() }
	for n := queue(); n < int64(want); n = queue() {
		go func() {
			_, err := take()
			rdb.RPush(context.Background(), sharedEvents(key), fmt.Sprint("got ", err))
		}()
		for start := time.Now(); queue() == n && time.Since(start) < 5*time.Second; {
			time.Sleep(2 * time.Millisecond)
		}
	}
	fmt.Println("queued")
	select {}
}
