package reliability_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// workerConfig is what a worker process is asked to do.
type workerConfig struct {
	ID    int
	Redis lockRedis // how the worker reaches the locks' Redis
	// Store is the address of the Redis of the stores the sections write
	// to, another than the locks', reached directly, never through a fault.
	Store      string
	Key        string
	Clients    int           // lock.Clients, each with its own connection pool
	Sections   int           // critical sections this worker completes
	Lease      time.Duration // every lock's lease
	Drift      time.Duration // the Clients' drift allowance; 0 for the default
	ReplicaAck int           // when positive, lock.WithReplicaAck(ReplicaAck, replicaAckTimeout)
	// Long, when positive, makes client 0's first section announce itself
	// with a "long" record and hold the lock for Long, or until it is lost,
	// between reading the stores and writing them.
	Long time.Duration
	// Work is how long every other section holds the lock between reading
	// the stores and writing them, unless it is lost first.
	Work time.Duration
	// Pause makes the long section, instead, wait after its announcement
	// for a line on stdin: the test freezes the process there, as a long GC
	// pause would just after the holder checked its context. The section
	// then writes without looking at its lock context again.
	Pause    bool
	Deadline time.Duration // the worker gives up after this long
	// Permits, when positive, has the sections take one of Permits
	// permits of Key (Client.Acquire) instead of its lock.
	Permits int
}

// lockRedis is how a worker reaches the locks' Redis.
type lockRedis struct {
	// Nodes are Redis addresses: one for lock.New, several for
	// lock.NewQuorum, or a Redis Cluster's seed nodes if Cluster is set.
	Nodes    []string
	Cluster  bool
	Sentinel string // a Sentinel's address: lock.New of a failover client of Master
	Master   string
}

// replicaAckTimeout is how long a write of a lock waits for its replicas'
// confirmation when workerConfig.ReplicaAck is set.
const replicaAckTimeout = 500 * time.Millisecond

// The stores: an unfenced counter, which a section increments with a GET
// and a SET, and the fenced store (fencedStore), whose value a section
// increments the same way, writing with its fencing token.
const counterKey = "reliability:counter"

// A record is one line a worker writes on stdout.
type record struct {
	Kind   string `json:"kind"` // "section", "long" (a long section entered) or "error" (Lock failed)
	Worker int    `json:"worker"`
	Client int    `json:"client"`

	Token  uint64 `json:"token,omitempty"`
	Fenced bool   `json:"fenced,omitempty"` // FencingToken reported ok
	Begin  int64  `json:"begin,omitempty"`  // CLOCK_MONOTONIC ns, just before Lock was called
	Enter  int64  `json:"enter,omitempty"`  // just after Lock returned
	Exit   int64  `json:"exit,omitempty"`   // just before unlock
	Live   bool   `json:"live,omitempty"`   // the lock context was not cancelled at Exit
	// Lost is when a context.AfterFunc on the lock context saw it cancelled
	// with cause lock.ErrLost; 0 if it never was before unlock.
	Lost  int64  `json:"lost,omitempty"`
	Cause string `json:"cause,omitempty"` // the lock context's cause, if cancelled before unlock
	Done  bool   `json:"done,omitempty"`  // the increments succeeded while the context was live
	// Write is when the section sent its writes to the stores (just before
	// the first); 0 if it sent none.
	Write    int64  `json:"write,omitempty"`
	Set      bool   `json:"set,omitempty"`       // the unfenced counter took the increment
	FenceSet bool   `json:"fence_set,omitempty"` // the fenced store took it
	Paused   bool   `json:"paused,omitempty"`    // the test froze the holder inside this section
	Err      string `json:"err,omitempty"`       // Lock, GET or SET error
	Unlock   string `json:"unlock,omitempty"`    // the UnlockFunc's error
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

// newLocker returns a Client of cfg.Redis with its own connections, and a
// function that closes them all.
func newLocker(cfg workerConfig) (*lock.Client, func(), error) {
	var rdbs []redis.UniversalClient
	switch r := cfg.Redis; {
	case r.Sentinel != "":
		rdbs = append(rdbs, redis.NewFailoverClient(&redis.FailoverOptions{MasterName: r.Master, SentinelAddrs: []string{r.Sentinel}}))
	case r.Cluster:
		rdbs = append(rdbs, redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Nodes}))
	default:
		for _, addr := range r.Nodes {
			rdbs = append(rdbs, redis.NewClient(&redis.Options{Addr: addr}))
		}
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
	if cfg.ReplicaAck > 0 {
		opts = append(opts, lock.WithReplicaAck(cfg.ReplicaAck, replicaAckTimeout))
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
		long = long && rec.Kind != "section"
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

// section takes the lock, increments both stores with a GET and a SET
// each, and unlocks, recording what happened.
func (w *contender) section(ctx context.Context, long bool) record {
	rec := record{Kind: "section", Worker: w.cfg.ID, Client: w.client, Begin: now()}
	var lctx context.Context
	var unlock lock.UnlockFunc
	var err error
	if w.cfg.Permits > 0 {
		lctx, unlock, err = w.c.Acquire(ctx, w.cfg.Key, w.cfg.Permits)
	} else {
		lctx, unlock, err = w.c.Lock(ctx, w.cfg.Key)
	}
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
	wctx := lctx
	v, fv, err := readStores(lctx, w.store)
	if err == nil && long {
		// The paused holder checks its context before it says it is inside:
		// the test freezes it as soon as it reads that, whatever line the
		// holder is at.
		if w.cfg.Pause && lctx.Err() == nil {
			// Whatever happens while it is frozen, its write goes out, as
			// one already on its way would.
			rec.Paused, wctx = true, context.WithoutCancel(lctx)
		}
		_ = w.out.emit(record{Kind: "long", Worker: w.cfg.ID, Client: w.client, Enter: rec.Enter})
		if rec.Paused {
			_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		} else {
			hold(lctx, w.cfg.Long)
		}
	} else if err == nil {
		hold(lctx, w.cfg.Work)
	}
	if err == nil {
		err = writeStores(wctx, w.store, &rec, v, fv)
	}
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

// hold waits d, or until the lock is lost.
func hold(lctx context.Context, d time.Duration) {
	select {
	case <-lctx.Done():
	case <-time.After(d):
	}
}

// readStores reads the unfenced counter and the fenced store's value, 0
// for one not written yet.
func readStores(ctx context.Context, rdb *redis.Client) (counter, fenced int, err error) {
	var get, hget *redis.StringCmd
	_, err = rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		get, hget = p.Get(ctx, counterKey), p.HGet(ctx, fencedStore, "value")
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, 0, err
	}
	if counter, err = storedInt(get); err != nil {
		return 0, 0, err
	}
	fenced, err = storedInt(hget)
	return counter, fenced, err
}

// storedInt is the integer cmd read, 0 for a missing key.
func storedInt(cmd *redis.StringCmd) (int, error) {
	n, err := cmd.Int()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// writeStores writes the increments of the values read: the counter's
// without atomicity (only the lock keeps two increments from reading the
// same value), then, when the lock has a fencing token, the fenced
// store's, which the store refuses if it took a higher token before.
func writeStores(ctx context.Context, rdb *redis.Client, rec *record, counter, fenced int) error {
	rec.Write = now()
	if err := rdb.Set(ctx, counterKey, counter+1, 0).Err(); err != nil {
		return err
	}
	rec.Set = true
	if !rec.Fenced {
		return nil
	}
	var err error
	rec.FenceSet, err = writeFenced(ctx, rdb, rec.Token, strconv.Itoa(fenced+1))
	return err
}
