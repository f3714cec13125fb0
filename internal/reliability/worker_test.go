package reliability_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// workerConfig is what a worker process is asked to do.
type workerConfig struct {
	ID       int
	Nodes    []string // Redis addresses: one for lock.New, several for lock.NewQuorum
	Store    string   // Redis address of the counter
	Key      string
	Clients  int           // lock.Clients, each with its own connection pool
	Sections int           // critical sections this worker completes
	Lease    time.Duration // every lock's lease
	Drift    time.Duration // the Clients' drift allowance; 0 for the default
	// Long, when positive, makes client 0's first section announce itself
	// with a "long" record and hold the lock for Long, or until it is lost.
	Long     time.Duration
	Deadline time.Duration // the worker gives up after this long
}

// counterKey is the Redis key the critical sections increment.
const counterKey = "reliability:counter"

// A record is one line a worker writes on stdout.
type record struct {
	Kind   string `json:"kind"` // "section", "long" (a long section entered) or "error" (Lock failed)
	Worker int    `json:"worker"`
	Client int    `json:"client"`

	Token  uint64 `json:"token,omitempty"`
	Fenced bool   `json:"fenced,omitempty"` // FencingToken reported ok
	Enter  int64  `json:"enter,omitempty"`  // CLOCK_MONOTONIC ns, just after Lock returned
	Exit   int64  `json:"exit,omitempty"`   // just before unlock
	Live   bool   `json:"live,omitempty"`   // the lock context was not cancelled at Exit
	// Lost is when a context.AfterFunc on the lock context saw it cancelled
	// with cause lock.ErrLost; 0 if it never was before unlock.
	Lost   int64  `json:"lost,omitempty"`
	Cause  string `json:"cause,omitempty"`  // the lock context's cause, if cancelled before unlock
	Done   bool   `json:"done,omitempty"`   // the increment succeeded while the context was live
	Err    string `json:"err,omitempty"`    // Lock, GET or SET error
	Unlock string `json:"unlock,omitempty"` // the UnlockFunc's error
}

// recorder writes records as JSON lines, one write each.
type recorder struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newRecorder(w io.Writer) *recorder { return &recorder{enc: json.NewEncoder(w)} }

func (r *recorder) emit(rec record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.enc.Encode(rec)
}

// runWorker runs cfg.Sections critical sections through cfg.Clients
// Clients, one goroutine each, and reports every attempt on stdout.
func runWorker(cfg workerConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Deadline)
	defer cancel()
	store := redis.NewClient(&redis.Options{Addr: cfg.Store})
	defer store.Close()
	out := newRecorder(os.Stdout)
	var claimed atomic.Int64
	var contenders []*contender
	for i := range cfg.Clients {
		c, closeAll, err := newLocker(cfg)
		if err != nil {
			return err
		}
		defer closeAll()
		contenders = append(contenders, &contender{cfg: cfg, client: i, c: c, store: store, out: out, claimed: &claimed})
	}
	errs := make(chan error, len(contenders))
	var wg sync.WaitGroup
	for _, w := range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.run(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// newLocker returns a Client of cfg.Nodes with its own connections, and a
// function that closes them all.
func newLocker(cfg workerConfig) (*lock.Client, func(), error) {
	var rdbs []redis.UniversalClient
	for _, addr := range cfg.Nodes {
		rdbs = append(rdbs, redis.NewClient(&redis.Options{Addr: addr}))
	}
	closeRedis := func() {
		for _, rdb := range rdbs {
			_ = rdb.Close()
		}
	}
	opts := []lock.Option{lock.WithDefaultLease(cfg.Lease)}
	if cfg.Drift > 0 {
		opts = append(opts, lock.WithDrift(cfg.Drift))
	}
	var c *lock.Client
	var err error
	if len(rdbs) == 1 {
		c, err = lock.New(rdbs[0], opts...)
	} else {
		c, err = lock.NewQuorum(rdbs, opts...)
	}
	if err != nil {
		closeRedis()
		return nil, nil, err
	}
	return c, func() { _ = c.Close(); closeRedis() }, nil
}

// contender is one goroutine of a worker, using one Client.
type contender struct {
	cfg     workerConfig
	client  int
	c       *lock.Client
	store   *redis.Client
	out     *recorder
	claimed *atomic.Int64 // sections completed or under way in this worker
}

func (w *contender) run(ctx context.Context) error {
	long := w.client == 0 && w.cfg.Long > 0
	for {
		if w.claimed.Add(1) > int64(w.cfg.Sections) {
			w.claimed.Add(-1) // a section under way may still fail: then it is run again
			return nil
		}
		rec := w.section(ctx, long)
		long = false
		if err := w.out.emit(rec); err != nil {
			return err
		}
		if rec.Done {
			continue
		}
		w.claimed.Add(-1) // another attempt must make up for it
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if rec.Kind == "error" {
			time.Sleep(10 * time.Millisecond) // Redis may be down: do not spin
		}
	}
}

// section takes the lock, increments the counter with a GET and a SET,
// and unlocks, recording what happened.
func (w *contender) section(ctx context.Context, long bool) record {
	rec := record{Kind: "section", Worker: w.cfg.ID, Client: w.client}
	lctx, unlock, err := w.c.Lock(ctx, w.cfg.Key)
	if err != nil {
		rec.Kind, rec.Err = "error", err.Error()
		return rec
	}
	rec.Enter = now()
	rec.Token, rec.Fenced = lock.FencingToken(lctx, w.cfg.Key)
	var lost atomic.Int64
	noticed := make(chan struct{})
	context.AfterFunc(lctx, func() {
		if errors.Is(context.Cause(lctx), lock.ErrLost) {
			lost.Store(now())
		}
		close(noticed)
	})
	if long {
		_ = w.out.emit(record{Kind: "long", Worker: w.cfg.ID, Client: w.client, Enter: rec.Enter})
		select {
		case <-lctx.Done():
		case <-time.After(w.cfg.Long):
		}
	}
	err = increment(lctx, w.store)
	rec.Exit = now()
	rec.Live = lctx.Err() == nil
	if !rec.Live {
		rec.Cause = context.Cause(lctx).Error()
	}
	rec.Done = err == nil && rec.Live
	if err != nil {
		rec.Err = err.Error()
	}
	if err := unlock(); err != nil {
		rec.Unlock = err.Error()
	}
	<-noticed // unlock cancelled lctx, if nothing did before
	rec.Lost = lost.Load()
	return rec
}

// increment adds one to the counter without atomicity: only the lock keeps
// two increments from reading the same value.
func increment(ctx context.Context, rdb *redis.Client) error {
	v, err := rdb.Get(ctx, counterKey).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	return rdb.Set(ctx, counterKey, v+1, 0).Err()
}
