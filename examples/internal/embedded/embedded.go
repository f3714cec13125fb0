// Package embedded gives the examples their Redis: the one at a URL, or an
// embedded miniredis whose clock follows real time, so that leases expire
// as they would on a real server.
package embedded

import (
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// tick is how often the embedded Redis's clock is moved forward.
const tick = 10 * time.Millisecond

// Redis returns the options of the Redis at url ("redis://host:port/db"),
// or, when url is empty, of a new embedded Redis. Call stop when done: it
// stops the embedded Redis (and does nothing for a URL).
func Redis(url string) (opt *redis.Options, stop func(), err error) {
	if url != "" {
		opt, err := redis.ParseURL(url)
		return opt, func() {}, err
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(tick)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return &redis.Options{Addr: mr.Addr()}, func() {
		close(done)
		wg.Wait()
		mr.Close()
	}, nil
}
