package cronlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/cronlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

func TestMain(m *testing.M) {
	redistest.QuietLogs()
	if addr := os.Getenv("CRONLOCK_CHILD_RUN"); addr != "" {
		runForever(addr)
		return
	}
	goleak.VerifyTestMain(m)
}

// newReal returns a client of a real redis-server started for the test.
func newReal(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	return srv, srv.Client(t)
}

// newRedis is newReal for a test that needs only the client.
func newRedis(t testing.TB) *redis.Client {
	t.Helper()
	_, rdb := newReal(t)
	return rdb
}

// fakeRedisTime is a real redis-server for locks and markers whose clock,
// as Schedulers see it, is a fake one: the Lockers made with locker answer
// Time (which cronlock measures its offset with) from clock, not TIME.
// SetTime sets that clock; FastForward moves it and every key's TTL
// together, as time passing for Redis.
type fakeRedisTime struct {
	*locktest.Redis
	rdb   *redis.Client // the client for the code under test
	clock *fakeClock
}

// newFakeRedisTime starts a redis-server whose clock reads now.
func newFakeRedisTime(t testing.TB, now time.Time) *fakeRedisTime {
	t.Helper()
	r, rdb := locktest.NewRedis(t)
	return &fakeRedisTime{Redis: r, rdb: rdb, clock: newFakeClock(now)}
}

// SetTime sets Redis's clock to now; TTLs are not touched.
func (r *fakeRedisTime) SetTime(now time.Time) { r.clock.set(now) }

// FastForward makes d pass for Redis: its clock moves by d, and keys
// expire or have their TTLs shortened by d (locktest.Redis.FastForward).
func (r *fakeRedisTime) FastForward(d time.Duration) {
	r.Redis.FastForward(d)
	r.clock.set(r.clock.now().Add(d))
}

// locker returns l whose Time tells r's clock. It still asks Redis for
// TIME first, so that it fails when Redis does.
func (r *fakeRedisTime) locker(l *lock.Client) lock.Locker { return fakeTimeLocker{l, r.clock} }

// fakeTimeLocker is a lock.Client whose Time reads a fake clock.
type fakeTimeLocker struct {
	*lock.Client
	clock *fakeClock
}

func (l fakeTimeLocker) Time(ctx context.Context) (time.Time, error) {
	if _, err := l.Client.Integration().Time(ctx); err != nil {
		return time.Time{}, err
	}
	return l.clock.now(), nil
}

// quiet is a logger that drops everything.
var quiet = slog.New(slog.DiscardHandler)

// newScheduler returns a quiet Scheduler over c that reports to rec (if
// not nil) and is stopped, and waited for, when the test ends.
func newScheduler(t testing.TB, c *cron.Cron, locker lock.Locker, rec *recorder, opts ...cronlock.Option) *cronlock.Scheduler {
	t.Helper()
	opts = append([]cronlock.Option{cronlock.WithLogger(quiet)}, opts...)
	if rec != nil {
		opts = append(opts, cronlock.WithOnAttempt(rec.add))
	}
	s := cronlock.New(c, locker, opts...)
	t.Cleanup(func() { waitStopped(t, s) })
	return s
}

// waitStopped stops s and waits up to 10 s for its runs to end.
func waitStopped(t testing.TB, s *cronlock.Scheduler) {
	t.Helper()
	select {
	case <-s.Stop().Done():
	case <-time.After(10 * time.Second):
		t.Errorf("Stop not done within 10 s")
	}
}

// mustAdd adds fn as job name or fails the test.
func mustAdd(t testing.TB, s *cronlock.Scheduler, spec, name string, fn func(context.Context) error, opts ...cronlock.JobOption) cron.EntryID {
	t.Helper()
	id, err := s.AddFunc(spec, name, fn, opts...)
	if err != nil {
		t.Fatalf("AddFunc(%q, %q): %v", spec, name, err)
	}
	return id
}

// fire makes the attempt cron makes at a tick of entry id, on this
// goroutine.
func fire(c *cron.Cron, id cron.EntryID) { c.Entry(id).WrappedJob.Run() }

// recorder collects attempts.
type recorder struct {
	mu       sync.Mutex
	attempts []cronlock.Attempt
	changed  chan struct{} // closed and replaced at every attempt
}

func newRecorder() *recorder { return &recorder{changed: make(chan struct{})} }

func (r *recorder) add(a cronlock.Attempt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, a)
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *recorder) all() []cronlock.Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]cronlock.Attempt(nil), r.attempts...)
}

// count returns how many attempts ended with o.
func (r *recorder) count(o cronlock.Outcome) int {
	n := 0
	for _, a := range r.all() {
		if a.Outcome == o {
			n++
		}
	}
	return n
}

// wait waits up to limit until done(attempts so far) is true and returns
// those attempts.
func (r *recorder) wait(t testing.TB, limit time.Duration, what string, done func([]cronlock.Attempt) bool) []cronlock.Attempt {
	t.Helper()
	deadline := time.After(limit)
	for {
		r.mu.Lock()
		all := append([]cronlock.Attempt(nil), r.attempts...)
		changed := r.changed
		r.mu.Unlock()
		if done(all) {
			return all
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("no %s within %v; attempts: %v", what, limit, all)
		}
	}
}

// waitRanSince waits until one of the attempts after the first from ran,
// failing the test after limit.
func (r *recorder) waitRanSince(t testing.TB, from int, limit time.Duration, what string) {
	t.Helper()
	r.wait(t, limit, what, func(as []cronlock.Attempt) bool {
		for _, a := range as[from:] {
			if a.Outcome == cronlock.OutcomeRan {
				return true
			}
		}
		return false
	})
}

// waitFor waits up to limit for an attempt that ended with o and returns
// the first one.
func (r *recorder) waitFor(t testing.TB, o cronlock.Outcome, limit time.Duration) cronlock.Attempt {
	t.Helper()
	var found cronlock.Attempt
	r.wait(t, limit, o.String()+" attempt", func(all []cronlock.Attempt) bool {
		for _, a := range all {
			if a.Outcome == o {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// waitN waits up to limit for n attempts.
func (r *recorder) waitN(t testing.TB, n int, limit time.Duration) []cronlock.Attempt {
	t.Helper()
	return r.wait(t, limit, fmt.Sprint(n, " attempts"), func(all []cronlock.Attempt) bool { return len(all) >= n })
}

// only returns the single attempt recorded, failing the test otherwise.
func (r *recorder) only(t testing.TB) cronlock.Attempt {
	t.Helper()
	all := r.all()
	if len(all) != 1 {
		t.Fatalf("got %d attempts %v, want 1", len(all), all)
	}
	return all[0]
}

// fakeClock is a settable clock for WithClock.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.set(t)
	return c
}

func (c *fakeClock) now() time.Time  { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) set(t time.Time) { c.ns.Store(t.UnixNano()) }

// tick0 is a whole second, the tick of "@every 1s" that fake clocks start
// at.
var tick0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var nameSeq atomic.Int64

// uniqueName returns a job name no other caller in this process gets.
func uniqueName() string { return "job" + strconv.FormatInt(nameSeq.Add(1), 10) }

// replica is one process's share of a job: its own lock Client, cron and
// Scheduler.
type replica struct {
	locker *lock.Client
	c      *cron.Cron
	s      *cronlock.Scheduler
	rec    *recorder
}

// newReplica returns a replica on rdb whose cron has a seconds field.
func newReplica(t testing.TB, rdb redis.UniversalClient, lockOpts []lock.Option, opts ...cronlock.Option) *replica {
	t.Helper()
	return newReplicaOf(t, rdb, lockOpts, func(l *lock.Client) lock.Locker { return l }, opts...)
}

// newLocalReplica is newReplica whose Scheduler keeps time by its own
// clock (as with a Locker that cannot tell Redis's time), so that a fake
// clock set with WithClock decides its ticks without Start.
func newLocalReplica(t testing.TB, rdb redis.UniversalClient, lockOpts []lock.Option, opts ...cronlock.Option) *replica {
	t.Helper()
	return newReplicaOf(t, rdb, lockOpts, func(l *lock.Client) lock.Locker { return lockerOnly{l} }, opts...)
}

// newReplica returns a replica on r, as the function newReplica does,
// whose Scheduler keeps time by r's fake clock.
func (r *fakeRedisTime) newReplica(t testing.TB, lockOpts []lock.Option, opts ...cronlock.Option) *replica {
	t.Helper()
	return newReplicaOf(t, r.rdb, lockOpts, r.locker, opts...)
}

// newReplicaOf returns a replica on rdb whose Scheduler has the Locker
// wrap makes of its lock Client.
func newReplicaOf(t testing.TB, rdb redis.UniversalClient, lockOpts []lock.Option, wrap func(*lock.Client) lock.Locker, opts ...cronlock.Option) *replica {
	t.Helper()
	r := &replica{locker: locktest.NewClient(t, rdb, lockOpts...), c: cron.New(cron.WithSeconds()), rec: newRecorder()}
	r.s = newScheduler(t, r.c, wrap(r.locker), r.rec, opts...)
	return r
}

// add adds fn as name on "@every 1s" to r.
func (r *replica) add(t testing.TB, name string, fn func(context.Context) error, opts ...cronlock.JobOption) cron.EntryID {
	t.Helper()
	return mustAdd(t, r.s, "@every 1s", name, fn, opts...)
}

// waitFree waits up to 5 s until key is free, takes it and releases it,
// and returns how long the wait took.
func waitFree(t testing.TB, l lock.Locker, key string) time.Duration {
	t.Helper()
	start := time.Now()
	_, unlock, err := l.Lock(context.Background(), key, lock.WithMaxWait(5*time.Second))
	if err != nil {
		t.Fatalf("%s not free: %v", key, err)
	}
	if err := unlock(); err != nil {
		t.Fatalf("unlock %s: %v", key, err)
	}
	return time.Since(start)
}

// Lock keys of job name, as documented in the package comment.
func runKey(name string) string  { return "cronlock:run:" + name }
func tickKey(name string) string { return "cronlock:tick:" + name }

// redisKey is the Redis key of lock key with the default prefix.
func redisKey(key string) string { return lock.DefaultPrefix + ":{" + key + "}" }

// outlive gives the held lock key a TTL of a minute, longer than any
// test: from then on only a release frees it, not the lapse of its lease,
// so that a test can tell the two apart.
func outlive(t testing.TB, srv *locktest.Redis, key string) {
	t.Helper()
	if !srv.Exists(redisKey(key)) {
		t.Fatalf("%s is not held", key)
	}
	srv.SetTTL(redisKey(key), time.Minute)
}
