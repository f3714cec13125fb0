package lock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

func benchLockUnlock(b *testing.B, opts ...lock.Option) {
	_, rdb := newReal(b)
	lockUnlockLoop(b, locktest.NewClient(b, rdb, opts...))
}

// lockUnlockLoop locks and unlocks key "bench" with c, b.N times.
func lockUnlockLoop(b *testing.B, c lock.Locker) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, unlock, err := c.Lock(ctx, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := unlock(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlock is one uncontended Lock and unlock against a real
// redis-server on loopback: two round trips.
func BenchmarkLockUnlock(b *testing.B) { benchLockUnlock(b) }

// BenchmarkLockUnlockLabelled is BenchmarkLockUnlock with an owner label
// (lock.WithOwnerLabel), the longest owner a Client writes.
func BenchmarkLockUnlockLabelled(b *testing.B) {
	benchLockUnlock(b, lock.WithOwnerLabel("payments-7f9c"))
}

// BenchmarkReentry is one re-entry and its unlock inside a held lock.
func BenchmarkReentry(b *testing.B) {
	_, rdb := newReal(b)
	c := locktest.NewClient(b, rdb)
	held, unlock := locktest.MustLock(b, c, context.Background(), "bench")
	defer unlock()
	b.ReportAllocs()
	for b.Loop() {
		_, unlockInner, err := c.Lock(held, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if err := unlockInner(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlockParallel is uncontended Lock and unlock from many
// goroutines, each on its own key.
func BenchmarkLockUnlockParallel(b *testing.B) {
	_, rdb := newReal(b)
	c := locktest.NewClient(b, rdb)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench:" + randKey()
		for pb.Next() {
			_, unlock, err := c.Lock(ctx, key)
			if err != nil {
				b.Fatal(err)
			}
			if err := unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkContended is Lock and unlock of one key from 8 goroutines of
// one Client: every acquisition but the first is a hand-off.
func BenchmarkContended(b *testing.B) {
	_, rdb := newReal(b)
	c := locktest.NewClient(b, rdb)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(4) // 8 goroutines on 2 CPUs
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, unlock, err := c.Lock(ctx, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if err := unlock(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkQuorum is an uncontended Lock and unlock over 5 quorum nodes,
// all up or with 2 of them down (one stopped, one frozen).
func BenchmarkQuorum(b *testing.B) {
	for _, down := range []int{0, 2} {
		b.Run(map[int]string{0: "all-up", 2: "two-down"}[down], func(b *testing.B) {
			var rdbs []redis.UniversalClient
			var srvs []*redistest.Server
			for range 5 {
				s := redistest.Start(b)
				srvs = append(srvs, s)
				rdbs = append(rdbs, s.Client(b))
			}
			c, err := lock.NewQuorum(rdbs)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			if down > 0 {
				srvs[0].Stop()
				srvs[1].Pause()
				defer srvs[1].Resume()
			}
			lockUnlockLoop(b, c)
		})
	}
}

// BenchmarkAcquireRelease is BenchmarkLockUnlock with one permit of a
// semaphore of one (Client.Acquire), to set beside it.
func BenchmarkAcquireRelease(b *testing.B) {
	_, rdb := newReal(b)
	c := locktest.NewClient(b, rdb)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, release, err := c.Acquire(ctx, "bench-sem", 1)
		if err != nil {
			b.Fatal(err)
		}
		if err := release(); err != nil {
			b.Fatal(err)
		}
	}
}
