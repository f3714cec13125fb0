package main

import (
	"context"
	"time"
)

// renewals is the renewal loop users of a library without a watchdog
// write: one goroutine per held lock, renewing every third of the lease
// until release. A renewal that fails is tried again at the next tick; a
// lease that lapses shows when the release finds the lock gone.
type renewals struct{ every time.Duration }

// keep renews with renew until the returned function is called, which
// stops the goroutine and then releases.
func (r renewals) keep(renew func(context.Context) error, release func() error) func() error {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(r.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = renew(ctx)
			}
		}
	}()
	return func() error {
		stop()
		<-done
		return release()
	}
}
