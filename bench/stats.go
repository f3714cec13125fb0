package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the q-quantile (0 < q ≤ 1) of ds by the nearest-rank
// method, or 0 for no samples. It sorts ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := int(math.Ceil(q*float64(len(ds)))) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}

// jain is Jain's fairness index of xs: 1 when all are equal, 1/n when one
// has everything. NaN when all are zero.
func jain(xs []int) float64 {
	var sum, squares float64
	for _, x := range xs {
		sum += float64(x)
		squares += float64(x) * float64(x)
	}
	return sum * sum / (float64(len(xs)) * squares)
}

// spread is the median, minimum and maximum of the values one figure took
// over the rounds; NaN values (figures that could not be computed) are
// left out.
func spread(vs []float64) (med, lo, hi float64, ok bool) {
	vs = slices.DeleteFunc(slices.Clone(vs), math.IsNaN)
	if len(vs) == 0 {
		return 0, 0, 0, false
	}
	slices.Sort(vs)
	n := len(vs)
	med = vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return med, vs[0], vs[n-1], true
}

// millis and micros express d in milliseconds and microseconds.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
