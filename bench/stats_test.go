package main

import (
	"math"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := func() []time.Duration {
		var d []time.Duration
		for i := 100; i >= 1; i-- {
			d = append(d, time.Duration(i))
		}
		return d
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 50}, {0.99, 99}, {1, 100}, {0.001, 1}} {
		if got := percentile(ds(), tc.q); got != tc.want {
			t.Errorf("percentile(1..100, %v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if got := percentile(nil, 0.5); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
}

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		xs   []int
		want float64
	}{
		{[]int{5, 5, 5, 5}, 1},
		{[]int{8, 0, 0, 0}, 0.25},
		{[]int{1, 3}, 0.8},
	} {
		if got := jain(tc.xs); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("jain(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
	if got := jain([]int{0, 0}); !math.IsNaN(got) {
		t.Errorf("jain of zeros = %v, want NaN", got)
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		vs          []float64
		med, lo, hi float64
		ok          bool
	}{
		{[]float64{3, 1, 2}, 2, 1, 3, true},
		{[]float64{4, 1, 2, 3}, 2.5, 1, 4, true},
		{[]float64{math.NaN(), 7}, 7, 7, 7, true},
		{[]float64{math.NaN()}, 0, 0, 0, false},
	} {
		med, lo, hi, ok := spread(tc.vs)
		if med != tc.med || lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("spread(%v) = %v %v %v %v, want %v %v %v %v", tc.vs, med, lo, hi, ok, tc.med, tc.lo, tc.hi, tc.ok)
		}
	}
}

func TestHandoffTimes(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	ts := []tenure{
		{acquired: at(10), released: at(12)},
		{acquired: at(0), released: at(5)},
		{acquired: at(11), released: at(20)}, // got the key before the release returned
	}
	got := handoffTimes(ts)
	want := []time.Duration{5 * time.Millisecond, -time.Millisecond}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("handoffTimes = %v, want %v", got, want)
	}
}
