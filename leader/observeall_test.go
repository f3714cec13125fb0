package leader_test

import (
	"context"
	"fmt"
	"sync"
	"time"

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

// checkObserved fails the test unless every term that led, up to token
// last, was observed with its replica's label and pid.
func (f *fleet) checkObserved(seen map[uint64]leader.Info, last uint64) {
	terms, _ := f.led()
	for tok, tm := range terms {
		if tok > last {
			continue
		}
		info, ok := seen[tok]
		if want := fmt.Sprintf("c%d", tm.id); !ok || info.Leader.Label != want || info.Leader.PID != f.cmds[tm.id].Process.Pid {
			f.t.Errorf("term %d of c%d (pid %d): observed %v %+v", tok, tm.id, f.cmds[tm.id].Process.Pid, ok, info)
		}
	}
	f.t.Logf("%d terms observed", len(seen))
}
