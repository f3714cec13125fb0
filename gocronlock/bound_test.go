package gocronlock_test

import (
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/lockkit/lockkit/gocronlock"
)

// TestOnceJustUnderTheBound runs a job every 2 s on two replicas whose
// clocks are 600 ms apart with a minimum hold of 1 s: the replicas fire
// for each tick just under three quarters of the hold apart (750 ms),
// and successive ticks more than five quarters (1.25 s) apart, so each
// tick runs once and none is missed.
func TestOnceJustUnderTheBound(t *testing.T) {
	t.Parallel()
	c := fleetCase{name: "CronJob every 2s, 2 replicas, clocks 600ms apart",
		def: func() gocron.JobDefinition { return gocron.CronJob("*/2 * * * * *", true) }, interval: every,
		offsets: []time.Duration{0, -600 * time.Millisecond}, tick: aligned(every)}
	got, spread, rec := runFleet(t, c, true, gocronlock.WithMinHold(time.Second))
	t.Logf("%s | gocronlock, min hold 1s | %v (replicas fired up to %v apart)", c.name, got, spread.Round(time.Millisecond))
	checkRow(t, got, 3, true, rec, spread)
}
