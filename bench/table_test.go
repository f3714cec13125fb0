package main

import (
	"math"
	"strings"
	"testing"
)

func TestFormatNum(t *testing.T) {
	for _, tc := range []struct {
		v        float64
		decimals int
		want     string
	}{
		{0, 0, "0"},
		{999, 0, "999"},
		{1000, 0, "1,000"},
		{1234567.891, 2, "1,234,567.89"},
		{-12345, 1, "-12,345.0"},
		{-0.001, 2, "0.00"},
		{math.Inf(1), 2, "+Inf"},
		{math.Inf(-1), 0, "-Inf"},
	} {
		if got := formatNum(tc.v, tc.decimals); got != tc.want {
			t.Errorf("formatNum(%v, %d) = %q, want %q", tc.v, tc.decimals, got, tc.want)
		}
	}
}

func TestTableWrite(t *testing.T) {
	tb := newTable("Title", "A note.", column{"a", "A", 0}, column{"b", "B", 2})
	tb.add("lib1", figures{"a": 10, "b": 1})
	tb.add("lib1", figures{"a": 30, "b": 1})
	tb.add("lib1", figures{"a": 20})
	tb.notApplicable("lib2")
	tb.detail["lib1"] = "details"
	var b strings.Builder
	tb.write(&b)
	want := "### Title\n\nA note.\n\n| library | A | B |\n|:--|--:|--:|\n" +
		"| lib1 | 20 (10–30) | 1.00 |\n| lib2 | n/a | n/a |\n\n- lib1: details\n\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
	if med, ok := tb.median("lib1", "b"); !ok || med != 1 {
		t.Errorf("median of b = %v %v, want 1 (the missing round left out)", med, ok)
	}
	if _, ok := tb.median("lib2", "a"); ok {
		t.Error("median of a library without figures reported")
	}
}

func TestTableWritesTextForInfinity(t *testing.T) {
	tb := newTable("T", "", column{"back", "back (s)", 2}, column{"n", "n", 0})
	tb.infinite["back"] = "not within 1 MiB"
	tb.add("lib1", figures{"back": 0.25, "n": math.Inf(1)}) // n has no text: formatted as a number
	tb.add("lib1", figures{"back": math.Inf(1), "n": 1})
	tb.add("lib1", figures{"back": math.Inf(1), "n": 2})
	tb.add("lib2", figures{"back": 0, "n": 0})
	var b strings.Builder
	tb.write(&b)
	want := "### T\n\n| library | back (s) | n |\n|:--|--:|--:|\n" +
		"| lib1 | not within 1 MiB (0.25–not within 1 MiB) | 2 (1–+Inf) |\n| lib2 | 0.00 | 0 |\n\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}
