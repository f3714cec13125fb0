package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Close while many goroutines lock and unlock (the pipe has queued calls
// and senders in flight): Close within 1 s, every call returns, nothing
// panics, and no goroutine is left once the calls returned.
func TestCloseUnderLoad(t *testing.T) {
	if !locktest.OwnProcess(t) { // checks the goroutines of the whole process
		return
	}
	for _, stall := range []bool{false, true} {
		t.Run(fmt.Sprint("stall=", stall), func(t *testing.T) {
			srv, _ := newReal(t)
			before := goleak.IgnoreCurrent()
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			c, err := lock.New(rdb)
			if err != nil {
				t.Fatal(err)
			}
			var ops atomic.Int64
			var wg sync.WaitGroup
			stop := make(chan struct{})
			for i := range 32 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprintf("close-load-%d", i%4)
					for {
						select {
						case <-stop:
							return
						default:
						}
						ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
						start := time.Now()
						_, unlock, err := c.Lock(ctx, key)
						if d := time.Since(start); d > locktest.Bound(400*time.Millisecond) {
							t.Errorf("Lock took %v with a 300 ms deadline: %v", d, err)
						}
						cancel()
						if errors.Is(err, lock.ErrClosed) {
							return
						}
						if err == nil {
							ops.Add(1)
							start = time.Now()
							uerr := unlock()
							if d := time.Since(start); d > time.Second+locktest.Bound(100*time.Millisecond) {
								t.Errorf("unlock took %v: %v", d, uerr)
							}
						}
					}
				}()
			}
			time.Sleep(700 * time.Millisecond)
			if stall {
				srv.Pause()
				time.Sleep(200 * time.Millisecond)
			}
			start := time.Now()
			err = c.Close()
			took := time.Since(start)
			t.Logf("Close after %d acquisitions took %v (%v)", ops.Load(), took, err)
			if took > locktest.Bound(time.Second) {
				t.Errorf("Close took %v", took)
			}
			close(stop)
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			locktest.Within(t, done, 3*time.Second, "callers after Close")
			if stall {
				srv.Resume()
			}
			time.Sleep(200 * time.Millisecond)
			if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).reaper")); err != nil {
				t.Errorf("goroutines left %v after Close: %v", time.Since(start), err)
			}
			_ = rdb.Close()
		})
	}
}
