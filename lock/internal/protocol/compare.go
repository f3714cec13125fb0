package protocol

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Tolerance is how far a script's run may differ from the model's
// because the script reads Redis's clock itself: times and durations by
// Ms; a token the model took from the clock (Clock, its Env.Micros) may
// be any µs from ClockFrom to ClockTo, and the tokens that call handed
// out after it follow it. Every other value is compared exactly.
type Tolerance struct {
	Ms                        int64
	Clock, ClockFrom, ClockTo int64
}

func (tl Tolerance) near(want, got int64) bool { return abs(want-got) <= tl.Ms }

func (tl Tolerance) token(want, got int64) bool {
	if d := want - tl.Clock; tl.Clock != 0 && d >= 0 && d < clockTokens {
		got -= d // the d-th token after one from the clock, in one call
		return got >= tl.ClockFrom && got <= tl.ClockTo
	}
	return want == got
}

// clockTokens bounds how many tokens one call hands out after one it took
// from the clock (share.lua's hand-offs).
const clockTokens = 1000

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// timeFields are the lock hash's fields that hold a moment (ms).
var timeFields = map[string]bool{"open": true, "open_until": true}

// DiffKeys reports how got, a key's data read from Redis at now, differs
// from want, the model's (before Key.At): a Redis key may be missing on
// one side only when it expires within the tolerance of now.
func DiffKeys(want, got Key, now int64, tl Tolerance) error {
	edge := func(exp int64) bool { return exp != NoTTL && tl.near(exp, now) }
	w := want.At(now)
	if (w.Hash == nil) != (got.Hash == nil) && !edge(want.HashExp) {
		return fmt.Errorf("lock hash %v, want %v", got.Hash, w.Hash)
	}
	if w.Hash != nil && got.Hash != nil {
		if !slices.Equal(slices.Sorted(maps.Keys(w.Hash)), slices.Sorted(maps.Keys(got.Hash))) {
			return fmt.Errorf("lock hash %v, want %v", got.Hash, w.Hash)
		}
		for f, wv := range w.Hash {
			if !sameField(f, wv, got.Hash[f], tl) {
				return fmt.Errorf("lock hash field %s = %s, want %s (hash %v, want %v)", f, got.Hash[f], wv, got.Hash, w.Hash)
			}
		}
		if !tl.near(w.HashExp, got.HashExp) {
			return fmt.Errorf("lock hash expires in %d ms, want %d", got.HashExp-now, w.HashExp-now)
		}
	}
	if (w.Queue == nil) != (got.Queue == nil) && !edge(want.QueueExp) {
		return fmt.Errorf("queue %v, want %v", got.Queue, w.Queue)
	}
	if w.Queue != nil && got.Queue != nil {
		if !slices.Equal(w.Queue, got.Queue) {
			return fmt.Errorf("queue %v, want %v", got.Queue, w.Queue)
		}
		if !tl.near(w.QueueExp, got.QueueExp) {
			return fmt.Errorf("queue expires in %d ms, want %d", got.QueueExp-now, w.QueueExp-now)
		}
	}
	if (w.Waits == nil) != (got.Waits == nil) && !edge(want.WaitsExp) {
		return fmt.Errorf("waits %v, want %v", got.Waits, w.Waits)
	}
	if w.Waits != nil && got.Waits != nil {
		if !slices.Equal(slices.Sorted(maps.Keys(w.Waits)), slices.Sorted(maps.Keys(got.Waits))) {
			return fmt.Errorf("waits %v, want %v", got.Waits, w.Waits)
		}
		for f, wv := range w.Waits {
			if !tl.near(wv, got.Waits[f]) {
				return fmt.Errorf("waits %s = %d, want %d", f, got.Waits[f], wv)
			}
		}
		if !tl.near(w.WaitsExp, got.WaitsExp) {
			return fmt.Errorf("waits expire in %d ms, want %d", got.WaitsExp-now, w.WaitsExp-now)
		}
	}
	return nil
}

func sameField(f, want, got string, tl Tolerance) bool {
	if want == got {
		return true
	}
	if strings.HasPrefix(f, "=") { // a shared holder: its token and lease end
		w, ok1 := parseShared(want)
		g, ok2 := parseShared(got)
		return ok1 && ok2 && w.kind == g.kind && w.count == g.count &&
			sameField("t", w.token, g.token, tl) && tl.near(w.until, g.until)
	}
	w, err1 := strconv.ParseInt(want, 10, 64)
	g, err2 := strconv.ParseInt(got, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	switch {
	case timeFields[f]:
		return w != 0 && g != 0 && tl.near(w, g)
	case f == "t":
		return tl.token(w, g)
	}
	return false
}

// DiffReplies reports how got, a script's reply, differs from the
// model's want.
func DiffReplies(want, got Reply, tl Tolerance) error {
	if len(want) != len(got) {
		return fmt.Errorf("reply %v, want %v", got, want)
	}
	for i, w := range want {
		g := got[i]
		ok := w.IsStr == g.IsStr && w.Str == g.Str
		switch w.Kind {
		case Exact:
			ok = ok && w.Int == g.Int
		case Time, Dur:
			ok = ok && tl.near(w.Int, g.Int)
		case Token:
			ok = ok && tl.token(w.Int, g.Int)
		}
		if !ok {
			return fmt.Errorf("reply %v, want %v (element %d)", got, want, i)
		}
	}
	return nil
}

// DiffMessages reports how got, the messages one channel received,
// differs from want, the model's messages on that channel.
func DiffMessages(want, got []Message, tl Tolerance) error {
	if len(want) != len(got) {
		return fmt.Errorf("messages %v, want %v", got, want)
	}
	for i, w := range want {
		g := got[i]
		if w.Client != g.Client || w.Kind != g.Kind || w.From != g.From || w.Owner != g.Owner ||
			!tl.token(w.Token, g.Token) || !tl.near(w.At, g.At) {
			return fmt.Errorf("message %d %q, want %q", i, g.Payload(), w.Payload())
		}
	}
	return nil
}
