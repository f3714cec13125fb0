package main

import (
	"math"
	"testing"
	"time"
)

const mebi = 1 << 20

func TestReclaimBackBeforeTheLeaseEnds(t *testing.T) {
	start := memSample{used: 10 * mebi, keys: 40, expires: 0}
	r := newReclaim(start, 3500*time.Millisecond, 5*time.Second)
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	steps := []struct {
		at   time.Duration
		m    memSample
		more bool
		wait time.Duration
	}{
		{ms(1), memSample{used: 170 * mebi, keys: 1_000_040, expires: 1_000_000}, true, memPoll},
		{ms(2000), memSample{used: 11*mebi + 1, keys: 20_040, expires: 20_000}, true, memPoll},
		{ms(2100), memSample{used: 11 * mebi, keys: 41, expires: 1}, true, memPoll}, // back: exactly 1 MiB above
		{ms(3480), memSample{used: 12 * mebi, keys: 40}, true, ms(20)},              // read again at 3.5 s
		{ms(3500), memSample{used: 10*mebi + 512, keys: 40}, false, memPoll},        // after the lease, and back: done
	}
	for _, s := range steps {
		if more := r.see(s.at, s.m); more != s.more {
			t.Fatalf("see at %v = %v, want %v", s.at, more, s.more)
		}
		if s.more {
			if w := r.wait(s.at); w != s.wait {
				t.Errorf("wait after %v = %v, want %v", s.at, w, s.wait)
			}
		}
	}
	f := r.figures(1_000_000)
	want := figures{
		"memStart":       10,
		"memRight":       160,
		"perKey":         160 * mebi / 1e6,
		"keysRight":      1_000_000,
		colMemNoTTL:      0,
		colMemAfterLease: 512.0 / mebi,
		"keysLease":      0,
		colMemBack:       2.1,
	}
	for k, v := range want {
		if math.Abs(f[k]-v) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, f[k], v)
		}
	}
}

func TestReclaimNeverBack(t *testing.T) {
	start := memSample{used: 10 * mebi, keys: 40, expires: 2}
	r := newReclaim(start, 3500*time.Millisecond, 5*time.Second)
	leaked := memSample{used: 170 * mebi, keys: 1_000_040, expires: 2}
	for at := time.Duration(0); ; at += memPoll {
		if !r.see(at, leaked) {
			if at != 5*time.Second {
				t.Fatalf("stopped at %v, want at the give-up time, 5s", at)
			}
			break
		}
	}
	f := r.figures(1_000_000)
	if !math.IsInf(f[colMemBack], 1) {
		t.Errorf("back within = %v, want +Inf (not within 1 MiB)", f[colMemBack])
	}
	if f[colMemNoTTL] != 1_000_000 || f["keysLease"] != 1_000_000 || f[colMemAfterLease] != 160 {
		t.Errorf("figures %v, want 1,000,000 keys without TTL left and 160 MiB after the lease", f)
	}
}

func TestReclaimBackAtOnce(t *testing.T) {
	r := newReclaim(memSample{used: 10 * mebi}, 3500*time.Millisecond, 5*time.Second)
	if !r.see(time.Millisecond, memSample{used: 10*mebi + 4096}) {
		t.Fatal("stopped before the figures after one lease were read")
	}
	if got := r.wait(3450 * time.Millisecond); got != memPoll {
		t.Errorf("wait at 3.45 s = %v, want %v", got, memPoll)
	}
	if r.see(3500*time.Millisecond, memSample{used: 10 * mebi}) {
		t.Fatal("went on after the lease though back since the start")
	}
	if got := r.figures(2000)[colMemBack]; got != 0.001 {
		t.Errorf("back within = %v s, want 0.001", got)
	}
}
