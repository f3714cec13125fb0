package leader_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/leader"
)

// observations collects what Observe sends, by token, until its channel
// closes.
type observations struct {
	mu     sync.Mutex
	byTok  map[uint64]leader.Info
	closed chan struct{}
}

// observeAll observes election name on in every 20 ms until ctx ends.
func observeAll(ctx context.Context, in leader.Inspector, name string) *observations {
	o := &observations{byTok: map[uint64]leader.Info{}, closed: make(chan struct{})}
	ch := leader.Observe(ctx, in, name, 20*time.Millisecond)
	go func() {
		defer close(o.closed)
		for info := range ch {
			if info.Led {
				o.mu.Lock()
				o.byTok[info.Token] = info
				o.mu.Unlock()
			}
		}
	}()
	return o
}

// get returns the terms observed so far, by token.
func (o *observations) get() map[uint64]leader.Info {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := make(map[uint64]leader.Info, len(o.byTok))
	for k, v := range o.byTok {
		got[k] = v
	}
	return got
}

// wait waits for Observe's channel to close and returns the terms.
func (o *observations) wait() map[uint64]leader.Info {
	<-o.closed
	return o.get()
}

// sawTerm waits, up to 1 s (scaled), for o to have seen term tm, and
// fails the test unless it did with tm's replica's label and pid.
func (f *fleet) sawTerm(o *observations, tm led) {
	f.t.Helper()
	var info leader.Info
	ok := locktest.ClosedWithin(waitFor(func() bool {
		info, _ = o.get()[tm.token]
		return info.Led
	}), locktest.Bound(time.Second))
	if want := fmt.Sprintf("c%d", tm.id); !ok || info.Leader.Label != want || info.Leader.PID != f.cmds[tm.id].Process.Pid {
		f.t.Errorf("term %d of c%d (pid %d): observed %v %+v", tm.token, tm.id, f.cmds[tm.id].Process.Pid, ok, info)
	}
}

// waitFor returns a channel closed when cond holds, polled every 5 ms;
// it stops polling after 10 s.
func waitFor(cond func() bool) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			if cond() {
				close(ch)
				return
			}
		}
	}()
	return ch
}
