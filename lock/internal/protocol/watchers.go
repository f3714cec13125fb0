package protocol

// Span is how far the who-is-told rule looks into the queue: the Span
// waiters behind the receiver of a hand-off, and the last Span waiters.
const Span = 16

// Watchers is the rule of who is told of a hand-off to o besides o, so
// that someone checks after the claim window that o took the lock (if
// o's process died, so did its other waiters). queue is the wait queue,
// o first (a hand-off leaves it there), and waits its deadlines; now and
// claim are in ms.
//
// It picks, never from o's Client and never two from one Client: the
// first waiters of the first two other Clients among the Span waiters
// behind o, then the last waiter of yet another Client among the last
// Span of the queue (two and a last one, so that another dead process,
// or a waiter giving up, does not leave the hand-off unchecked). Of
// those it returns the ones that will not try by themselves within two
// claim windows: a waiter whose deadline is that near was told of a
// lease or turn that ends within a window, tries then, finds the lock
// held by o or a later owner and tries again when that one's window
// ends, which checks the hand-off as a message would.
func Watchers(queue []string, waits map[string]int64, o string, now, claim int64) []string {
	head := queue[:min(len(queue), Span+1)]
	told := map[string]bool{ClientOf(o): true}
	var ws []string
	consider := func(w string) {
		if c := ClientOf(w); !told[c] {
			told[c] = true
			ws = append(ws, w)
		}
	}
	for i := 1; i < len(head) && len(ws) < 2; i++ {
		consider(head[i])
	}
	tail, from := head, 1 // the whole queue behind o when it is short
	if len(head) == Span+1 {
		tail, from = queue[len(queue)-Span:], 0
	}
	before := len(ws)
	for i := len(tail) - 1; i >= from && len(ws) == before; i-- {
		consider(tail[i])
	}
	var out []string
	for _, w := range ws {
		if d, ok := waits[w]; !ok || d > now+2*claim {
			out = append(out, w)
		}
	}
	return out
}
