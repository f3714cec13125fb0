package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// A column is one figure a scenario measures.
type column struct {
	key      string
	title    string
	decimals int
}

// figures are one run's values by column key.
type figures map[string]float64

// A table holds one scenario case: per library, each figure's value in
// every round, reported as the median with min–max.
type table struct {
	title string
	note  string
	cols  []column

	libs   []string                        // in the order first seen
	values map[string]map[string][]float64 // library -> key -> rounds
	detail map[string]string               // library -> text from its last run
	na     map[string]bool                 // library has no such feature

	// infinite is the text a column shows for +Inf (by column key), such
	// as "not within 1 MiB" for something that did not happen in time.
	infinite map[string]string
}

func newTable(title, note string, cols ...column) *table {
	return &table{
		title:  title,
		note:   note,
		cols:   cols,
		values: make(map[string]map[string][]float64),
		detail: make(map[string]string),
		na:     make(map[string]bool),

		infinite: make(map[string]string),
	}
}

func (t *table) row(lib string) map[string][]float64 {
	r := t.values[lib]
	if r == nil {
		r = make(map[string][]float64)
		t.values[lib] = r
		t.libs = append(t.libs, lib)
	}
	return r
}

// add records one run of lib. A figure the run did not produce counts as
// missing in that round.
func (t *table) add(lib string, f figures) {
	r := t.row(lib)
	for _, c := range t.cols {
		v, ok := f[c.key]
		if !ok {
			v = math.NaN()
		}
		r[c.key] = append(r[c.key], v)
	}
}

func (t *table) notApplicable(lib string) {
	t.row(lib)
	t.na[lib] = true
}

// median returns lib's median of the figure key over the rounds.
func (t *table) median(lib, key string) (float64, bool) {
	med, _, _, ok := spread(t.values[lib][key])
	return med, ok
}

// joinNotes joins the notes that are not empty for a detail line.
func joinNotes(notes ...string) string {
	return strings.Join(slices.DeleteFunc(notes, func(n string) bool { return n == "" }), "; ")
}

// write renders t as a Markdown section.
func (t *table) write(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", t.title)
	if t.note != "" {
		fmt.Fprintf(w, "%s\n\n", t.note)
	}
	head := []string{"library"}
	rule := []string{":--"}
	for _, c := range t.cols {
		head = append(head, c.title)
		rule = append(rule, "--:")
	}
	fmt.Fprintf(w, "| %s |\n|%s|\n", strings.Join(head, " | "), strings.Join(rule, "|"))
	for _, lib := range t.libs {
		cells := []string{lib}
		for _, c := range t.cols {
			cells = append(cells, t.cell(lib, c))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	details := false
	for _, lib := range t.libs {
		if d := strings.Join(strings.Fields(t.detail[lib]), " "); d != "" { // one line, whatever the error text
			fmt.Fprintf(w, "- %s: %s\n", lib, d)
			details = true
		}
	}
	if details {
		fmt.Fprintln(w)
	}
}

func (t *table) cell(lib string, c column) string {
	if t.na[lib] {
		return "n/a"
	}
	med, lo, hi, ok := spread(t.values[lib][c.key])
	if !ok {
		return "—"
	}
	s := t.format(c, med)
	if l, h := t.format(c, lo), t.format(c, hi); l != h {
		s += " (" + l + "–" + h + ")"
	}
	return s
}

// format formats v for column c: its text for +Inf if it has one, else
// formatNum.
func (t *table) format(c column, v float64) string {
	if text, ok := t.infinite[c.key]; ok && math.IsInf(v, 1) {
		return text
	}
	return formatNum(v, c.decimals)
}

// formatNum formats v with decimals places and thousands separators.
func formatNum(v float64, decimals int) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return strconv.FormatFloat(v, 'f', decimals, 64) // +Inf, -Inf, NaN
	}
	s := strconv.FormatFloat(math.Abs(v), 'f', decimals, 64)
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	if v < 0 && strings.Trim(s, "0.") != "" {
		b.WriteByte('-')
	}
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if frac != "" {
		b.WriteString("." + frac)
	}
	return b.String()
}
