package main

import (
	"errors"
	"strings"
	"testing"
)

func TestLossesCountOnlyLostLocks(t *testing.T) {
	var l losses
	other := errors.New("connection refused")
	if err := l.check(other); err != other {
		t.Fatalf("check(%v) = %v, want the error back", other, err)
	}
	if err := l.check(nil); err != nil {
		t.Fatalf("check(nil) = %v", err)
	}
	if l.note() != "" {
		t.Fatalf("note with no loss = %q", l.note())
	}
	for range 2 {
		if err := l.check(lostBecause(errors.New("gone"))); err != nil {
			t.Fatalf("a lost lock was returned as an error: %v", err)
		}
	}
	if l.count() != 2 || !strings.HasPrefix(l.note(), "2 lock(s) lost while held, first: lock lost while held: gone") {
		t.Fatalf("count %v, note %q", l.count(), l.note())
	}
}
