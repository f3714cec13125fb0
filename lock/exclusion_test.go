package lock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
)

// Exclusion: at most one live holder of a key at a time, across Clients and
// processes, and a holder whose key was taken over knows it lost it first.

// interval is one hold of a key: from Lock's return to the unlock call or
// the end of the lock context, whichever came first.
type interval struct {
	key        string
	start, end time.Time
	who        string
}

type holdLog struct {
	mu  sync.Mutex
	all []interval
}

// section holds lctx's lock for a little while and records the hold.
func (hl *holdLog) section(lctx context.Context, key, who string, unlock lock.UnlockFunc) {
	start := time.Now()
	var endedAt atomic.Int64
	stop := context.AfterFunc(lctx, func() { endedAt.Store(time.Now().UnixNano()) })
	time.Sleep(time.Duration(rand.N(3000)) * time.Microsecond)
	end := time.Now()
	stop()
	if ns := endedAt.Load(); ns != 0 && time.Unix(0, ns).Before(end) {
		end = time.Unix(0, ns)
	}
	_ = unlock()
	hl.mu.Lock()
	hl.all = append(hl.all, interval{key, start, end, who})
	hl.mu.Unlock()
}

// overlaps returns the pairs of holds of one key that overlapped.
func (hl *holdLog) overlaps() []string {
	hl.mu.Lock()
	defer hl.mu.Unlock()
	by := map[string][]interval{}
	for _, iv := range hl.all {
		by[iv.key] = append(by[iv.key], iv)
	}
	var out []string
	for key, ivs := range by {
		sort.Slice(ivs, func(i, j int) bool { return ivs[i].start.Before(ivs[j].start) })
		var last interval
		for i, iv := range ivs {
			if i > 0 && iv.start.Before(last.end) {
				out = append(out, fmt.Sprintf("%q: %s held from %v, %s from %v, overlap %v",
					key, last.who, last.start.Format("15:04:05.000000"), iv.who, iv.start.Format("15:04:05.000000"), last.end.Sub(iv.start)))
			}
			if i == 0 || iv.end.After(last.end) {
				last = iv
			}
		}
	}
	return out
}

// hammer runs workers goroutines of rounds critical sections each; worker
// w locks through lockers[w%len(lockers)], its round r on key
// keys[(w+r)%len(keys)]. A section does a non-atomic GET/SET increment of
// the key's counter in data. The test fails on any error, on two holders of
// a key at once, and on a lost increment.
func hammer(t *testing.T, lockers []lock.Locker, data redis.Cmdable, keys []string, workers, rounds int, opts ...lock.LockOption) {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	inside := map[string]int{}
	want := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		for r := range rounds {
			want[keys[(w+r)%len(keys)]]++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				key := keys[(w+r)%len(keys)]
				lctx, unlock, err := lockers[w%len(lockers)].Lock(ctx, key, opts...)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				inside[key]++
				n := inside[key]
				mu.Unlock()
				if n > 1 {
					errs <- fmt.Errorf("%d holders of %q at once", n, key)
					return
				}
				v, _ := data.Get(lctx, key+":n").Int()
				err = data.Set(lctx, key+":n", v+1, 0).Err()
				mu.Lock()
				inside[key]--
				mu.Unlock()
				if err == nil {
					err = unlock()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for key, n := range want {
		if got, err := data.Get(ctx, key+":n").Int(); err != nil || got != n {
			t.Fatalf("counter of %q = %d (%v), want %d", key, got, err, n)
		}
	}
}

// TestMutualExclusion runs 50 goroutines × 200 critical sections on one key
// through three Clients with their own connection pools.
func TestMutualExclusion(t *testing.T) {
	t.Parallel() // long and independent: its own servers
	srv, rdb := newReal(t)
	var lockers []lock.Locker
	for range 3 {
		lockers = append(lockers, locktest.NewClient(t, srv.Client(t)))
	}
	hammer(t, lockers, rdb, []string{"counter"}, 50, 200)
}

func TestHoldingOtherKeysStillContends(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	a, unlockA := locktest.MustLock(t, c, ctx, "a")
	defer unlockA()
	_, unlockB := locktest.MustLock(t, c, ctx, "b")
	defer unlockB()
	if _, _, err := c.TryLock(a, "b"); !errors.Is(err, lock.ErrNotObtained) {
		t.Fatalf("holder of a TryLock(b) = %v, want ErrNotObtained", err)
	}
	// A context holding two keys holds both.
	ab, unlockAB := locktest.MustLock(t, c, a, "c")
	defer unlockAB()
	if !lock.Held(ab, "a") || !lock.Held(ab, "c") {
		t.Fatal("nested holds of different keys not both held")
	}
}

func TestKeysStayDistinct(t *testing.T) {
	t.Parallel()
	_, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	ctx := context.Background()
	long := strings.Repeat("x", 10<<10)
	keys := []string{
		"a", "a:b", "a}b", "a{b", "{a}", "{a}b", "a%7Db", "a%b", "%h00",
		"ключ", "🔒", long, long + "y", strings.Repeat("y", 128), strings.Repeat("y", 129),
	}
	var unlocks []lock.UnlockFunc
	for _, k := range keys {
		_, unlock, err := c.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("TryLock(%.20q): %v", k, err)
		}
		unlocks = append(unlocks, unlock)
	}
	for _, k := range keys { // each is now held: a second owner is refused
		if _, _, err := c.TryLock(ctx, k); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("second TryLock(%.20q) = %v, want ErrNotObtained", k, err)
		}
	}
	for _, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
	}
}

// A Client keeps the Redis names of its last 256 keys, shared by holds: keys with braces, percent signs, unicode, and keys around the
// 128-byte limit of a readable tag (equal up to the last byte) stay
// distinct; two Clients with different prefixes do not exclude each
// other; more than 256 keys (the cache emptied) keep working.
func TestKeyCacheKeepsKeysDistinct(t *testing.T) {
	t.Parallel()
	srv, _ := newReal(t)
	ctx := context.Background()
	a := locktest.NewClient(t, srv.Client(t), lock.WithPrefix("p1"))
	a2 := locktest.NewClient(t, srv.Client(t), lock.WithPrefix("p1"))
	b := locktest.NewClient(t, srv.Client(t), lock.WithPrefix("p2"))

	base := randKey()
	keys := []string{base, "{" + base + "}", "%7B" + base + "%7D", "%25" + base, base + "é", base + "e\u0301", base + "}{"}
	for _, n := range []int{127, 128, 129, 200} {
		long := strings.Repeat("x", n-len(base)-1) + base
		keys = append(keys, long+"a", long+"b")
		braces := strings.Repeat("{", n/3) + base // escapes to more than 128 bytes
		keys = append(keys, braces, braces+"}")
	}
	for i := range 300 {
		keys = append(keys, fmt.Sprintf("%s-many-%d", base, i))
	}
	seen := map[string]bool{}
	uniq := keys[:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, k)
		}
	}
	keys = uniq
	var unlocks []lock.UnlockFunc
	for _, k := range keys {
		actx, ua, err := a.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("a: TryLock(%q): %v (keys must stay distinct)", k, err)
		}
		if !lock.Held(actx, k) {
			t.Fatalf("a: not Held(%q)", k)
		}
		_, ub, err := b.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("b (another prefix): TryLock(%q): %v", k, err)
		}
		unlocks = append(unlocks, ua, ub)
	}
	for _, k := range keys {
		if _, _, err := a2.TryLock(ctx, k); !errors.Is(err, lock.ErrNotObtained) {
			t.Fatalf("a2 (same prefix): TryLock(%q) = %v, want ErrNotObtained", k, err)
		}
	}
	for _, u := range unlocks {
		if err := u(); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range keys[:20] {
		_, u, err := a2.TryLock(ctx, k)
		if err != nil {
			t.Fatalf("a2 after unlock: TryLock(%q): %v", k, err)
		}
		_ = u()
	}
}

func TestRedisKeySizeBounded(t *testing.T) {
	t.Parallel()
	mr, rdb := locktest.NewRedis(t)
	c := locktest.NewClient(t, rdb)
	_, unlock := locktest.MustLock(t, c, context.Background(), strings.Repeat("z", lock.MaxKeyLen))
	defer unlock()
	for _, k := range mr.Keys() {
		if len(k) > 100 {
			t.Errorf("Redis key of %d bytes: %.40q...", len(k), k)
		}
	}
}
