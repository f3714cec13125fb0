package main

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// syscallCounts are system calls by name, such as "futex".
type syscallCounts map[string]int64

// parseStraceSummary reads the summary of strace -c -U name,calls:
//
//	syscall              calls
//	---------------- ---------
//	futex                 9520
//	...
//	---------------- ---------
//	total                20031
//
// and checks that the calls add up to its total. A line that begins with
// a process id is a note of strace's own, which -f may mix into the
// summary ("17113 ???( <detached ...>", a thread that ended as strace
// let go of it), and is skipped.
func parseStraceSummary(text string) (syscallCounts, error) {
	counts := syscallCounts{}
	total := int64(-1)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] == "syscall" || strings.HasPrefix(f[0], "---") {
			continue
		}
		if _, err := strconv.Atoi(f[0]); err == nil {
			continue // strace's note about a process
		}
		if len(f) != 2 {
			return nil, fmt.Errorf("strace summary: unexpected line %q", sc.Text())
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("strace summary: %q: %w", sc.Text(), err)
		}
		if f[0] == "total" {
			total = n
			continue
		}
		counts[f[0]] += n
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case total < 0:
		return nil, errors.New("strace summary: no total")
	case total != counts.total():
		return nil, fmt.Errorf("strace summary: calls add up to %d, total says %d", counts.total(), total)
	}
	return counts, nil
}

func (c syscallCounts) total() int64 {
	var t int64
	for _, n := range c {
		t += n
	}
	return t
}

// sub returns c less before, by name; a name can end up negative.
func (c syscallCounts) sub(before syscallCounts) syscallCounts {
	d := syscallCounts{}
	for name, n := range c {
		d[name] = n
	}
	for name, n := range before {
		d[name] -= n
	}
	return d
}

// top lists the n most frequent system calls per unit, most first, e.g.
// "futex 4.70, nanosleep 4.30, write 2.00".
func (c syscallCounts) top(n int, per float64) string {
	names := make([]string, 0, len(c))
	for name := range c {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(c[b], c[a]), strings.Compare(a, b)) })
	parts := make([]string, 0, n)
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s %.2f", name, float64(c[name])/per))
	}
	return strings.Join(parts, ", ")
}
