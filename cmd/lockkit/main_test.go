package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

// lockkit runs the command in-process with args, stdin and REDIS_URL
// redisURL, and returns its exit code, stdout and stderr.
func lockkit(t *testing.T, ctx context.Context, redisURL, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctx, args, env{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		getenv: func(name string) string {
			if name == "REDIS_URL" {
				return redisURL
			}
			return ""
		},
	})
	return code, out.String(), errOut.String()
}

// holder returns a lock Client with label on rdb.
func holder(t *testing.T, rdb redis.UniversalClient, label string, opts ...lock.Option) *lock.Client {
	t.Helper()
	return locktest.NewClient(t, rdb, append([]lock.Option{lock.WithOwnerLabel(label)}, opts...)...)
}

func TestLsAndShow(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	a := holder(t, rdb, "payments-7f9c")
	held, unlock := locktest.MustLock(t, a, ctx, "orders:42")
	defer unlock()
	_, unlock2 := locktest.MustLock(t, a, held, "orders:42")
	defer unlock2()
	_, unlock3 := locktest.MustLock(t, holder(t, rdb, "billing"), ctx, "users:7")
	defer unlock3()
	tok, _ := lock.FencingToken(held, "orders:42")

	code, out, errOut := lockkit(t, ctx, url, "", "ls")
	if code != exitOK || !strings.Contains(out, "orders:42") || !strings.Contains(out, "payments-7f9c") || !strings.Contains(out, "users:7") {
		t.Fatalf("ls: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = lockkit(t, ctx, url, "", "ls", "orders:*", "-o", "json")
	var got jsonInfo
	if code != exitOK || strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("ls orders:* -o json: %d\n%s", code, out)
	}
	if got.Key != "orders:42" || !got.Held || got.HoldCount != 2 || got.Token != tok || got.Holder.Label != "payments-7f9c" || got.RemainingLeaseMS <= 0 {
		t.Fatalf("ls -o json: %+v", got)
	}

	code, out, _ = lockkit(t, ctx, url, "", "show", "orders:42")
	for _, want := range []string{"state:         held", "payments-7f9c", "hold count:    2", "fencing token: " + token(tok)} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Fatalf("show: %d, want %q in\n%s", code, want, out)
		}
	}
	code, out, _ = lockkit(t, ctx, url, "", "-o", "json", "show", "free")
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil || got.Held || got.Key != "free" {
		t.Fatalf("show of a free key: %d %s", code, out)
	}
	// Another prefix sees none of them.
	code, out, _ = lockkit(t, ctx, url, "", "ls", "-prefix", "other")
	if code != exitOK || strings.Contains(out, "orders") {
		t.Fatalf("ls -prefix other: %d\n%s", code, out)
	}
}

// An integration's own locks (cronlock's tick markers, lock.Integration.Internal)
// are not listed among the users' unless asked for.
func TestLsKeepsInternalLocksApart(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	c := holder(t, rdb, "cron")
	_, unlockRun := locktest.MustLock(t, c, ctx, "cronlock:run:report")
	defer unlockRun()
	_, unlockTick := locktest.MustLock(t, c, ctx, "cronlock:tick:report", lock.Integration{}.Internal())
	defer unlockTick()

	code, out, errOut := lockkit(t, ctx, url, "", "ls")
	if code != exitOK || !strings.Contains(out, "cronlock:run:report") || strings.Contains(out, "cronlock:tick:report") {
		t.Fatalf("ls: %d, want the run lock and not the tick marker:\n%s%s", code, out, errOut)
	}
	code, out, errOut = lockkit(t, ctx, url, "", "ls", "-internal", "-o", "json")
	if code != exitOK || !strings.Contains(out, "cronlock:run:report") || !strings.Contains(out, `"internal":true`) {
		t.Fatalf("ls -internal: %d, want both, the marker marked internal:\n%s%s", code, out, errOut)
	}
}

func TestUnlockForce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	old := holder(t, rdb, "stuck", lock.WithDefaultLease(600*time.Millisecond))
	held, unlock := locktest.MustLock(t, old, ctx, "orders:42")
	defer unlock()
	oldToken, _ := lock.FencingToken(held, "orders:42")
	next := locktest.TokenWhenLocked(t, holder(t, rdb, "next"), ctx, "orders:42")
	waitQueue(t, rdb, "lockkit:{orders:42}:queue")

	code, _, errOut := lockkit(t, ctx, url, "n\n", "unlock", "--force", "orders:42")
	if code != exitDeclined || !strings.Contains(errOut, "held by stuck") || !strings.Contains(errOut, "[y/N]") || !locktest.Held(t, rdb, "lockkit:{orders:42}") {
		t.Fatalf("declined: %d\n%s", code, errOut)
	}
	code, _, errOut = lockkit(t, ctx, url, "", "unlock", "--force", "orders:42") // no answer: EOF
	if code != exitDeclined {
		t.Fatalf("no answer: %d\n%s", code, errOut)
	}
	code, out, errOut := lockkit(t, ctx, url, "y\n", "unlock", "--force", "orders:42")
	if code != exitOK || !strings.Contains(out, "ended the hold of stuck") || !strings.Contains(out, "handed to the next waiter, next") {
		t.Fatalf("confirmed: %d\n%s%s", code, out, errOut)
	}
	if tok := <-next; tok <= oldToken {
		t.Fatalf("next token %d, want more than %d", tok, oldToken)
	}
	<-held.Done() // the old holder's watchdog: ErrLost at its next renewal
	if context.Cause(held) != lock.ErrLost {
		t.Fatalf("old holder: %v", context.Cause(held))
	}

	code, _, errOut = lockkit(t, ctx, url, "", "unlock", "--force", "--yes", "orders:42")
	if code != exitNotHeld || !strings.Contains(errOut, "not held") {
		t.Fatalf("not held: %d %s", code, errOut)
	}
	_, unlockAgain := locktest.MustLock(t, old, ctx, "again")
	defer unlockAgain()
	code, out, _ = lockkit(t, ctx, url, "", "unlock", "-o", "json", "--force", "--yes", "again")
	var f jsonForced
	if code != exitOK || json.Unmarshal([]byte(out), &f) != nil || f.Holder.Label != "stuck" || f.Token == 0 {
		t.Fatalf("--yes -o json: %d %s", code, out)
	}
	code, _, errOut = lockkit(t, ctx, url, "", "unlock", "orders:42")
	if code != exitUsage || !strings.Contains(errOut, "--force") {
		t.Fatalf("without --force: %d %s", code, errOut)
	}
}

func waitQueue(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for rdb.LLen(context.Background(), name).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("nothing queued in %s", name)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestUsage(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr
	ctx := context.Background()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "Usage: lockkit"},
		{[]string{"-h"}, exitOK, "Exit codes"},
		{[]string{"rm", "k"}, exitUsage, `unknown verb "rm"`},
		{[]string{"ls", "-h"}, exitOK, "Usage: lockkit ls [PATTERN]"},
		{[]string{"show", "-h"}, exitOK, "Usage: lockkit show KEY"},
		{[]string{"watch", "-h"}, exitOK, "Usage: lockkit watch KEY"},
		{[]string{"unlock", "-h"}, exitOK, "-yes"},
		{[]string{"show"}, exitUsage, "want KEY, got 0"},
		{[]string{"show", "a", "b"}, exitUsage, "want KEY, got 2"},
		{[]string{"ls", "a", "b"}, exitUsage, "want [PATTERN], got 2"},
		{[]string{"show", ""}, exitUsage, "empty key"},
		{[]string{"ls", "["}, exitUsage, "pattern"},
		{[]string{"ls", ""}, exitUsage, "empty pattern"},
		{[]string{"ls", "-o", "yaml"}, exitUsage, "want table or json"},
		{[]string{"ls", "-timeout", "0s"}, exitUsage, "must be positive"},
		{[]string{"ls", "-nope"}, exitUsage, "flag provided but not defined"},
		{[]string{"-redis", "127.0.0.1:1", "ls"}, exitFailure, "connection refused"},
		{[]string{"-redis", "http://x", "ls"}, exitUsage, "invalid URL scheme"},
		{[]string{"-redis", "127.0.0.1:1", "-quorum", "ls"}, exitUsage, "at least 3"},
	} {
		code, out, errOut := lockkit(t, ctx, url, "", tc.args...)
		if code != tc.code || !strings.Contains(out+errOut, tc.want) {
			t.Errorf("lockkit %q: %d, want %d and %q in\n%s%s", tc.args, code, tc.code, tc.want, out, errOut)
		}
	}
}

// watched is the output of a lockkit watch run, read as it comes.
type watched struct {
	lines chan string
	seen  string // what has come so far
}

// watchRun runs lockkit watch until the returned stop is called, which
// returns its exit code and stderr.
func watchRun(t *testing.T, url string, args ...string) (*watched, func() (int, string)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	w := &watched{lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	var errOut bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := run(ctx, append([]string{"-redis", url, "watch"}, args...), env{stdin: strings.NewReader(""), stdout: pw, stderr: &errOut, getenv: func(string) string { return "" }})
		_ = pw.Close()
		done <- code
	}()
	return w, func() (int, string) {
		cancel()
		for range w.lines { // until run returns and closes the pipe
		}
		return <-done, errOut.String()
	}
}

// waitOutput waits until the watch has printed every one of want, in
// order, since the start.
func waitOutput(t *testing.T, w *watched, want ...string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		rest, ok := w.seen, true
		for _, s := range want {
			i := strings.Index(rest, s)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(s):]
		}
		if ok {
			return
		}
		select {
		case line := <-w.lines:
			w.seen += line + "\n"
		case <-timeout:
			t.Fatalf("output never had %q in order:\n%s", want, w.seen)
		}
	}
}

func TestWatch(t *testing.T) {
	for _, notify := range []bool{true, false} {
		t.Run(map[bool]string{true: "notifications", false: "channels"}[notify], func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			ctx := context.Background()
			if notify {
				rdb.ConfigSet(ctx, "notify-keyspace-events", "Kghlx")
			}
			a := holder(t, rdb, "first")
			_, unlockA := locktest.MustLock(t, a, ctx, "k")
			out, stop := watchRun(t, "redis://"+srv.Addr, "k")
			waitOutput(t, out, "held by first")
			gotB := lockLater(t, holder(t, rdb, "second"), "k")
			if notify {
				waitOutput(t, out, "held by first", "1 waiting: second")
			} else {
				waitQueue(t, rdb, "lockkit:{k}:queue")
			}
			if err := unlockA(); err != nil {
				t.Fatal(err)
			}
			waitOutput(t, out, "handed to second", "with token", "released by first", "held by second")
			unlockB := <-gotB
			if err := unlockB(); err != nil {
				t.Fatal(err)
			}
			// A release with nobody waiting and a force-unlock send no
			// hand-off: watch reads them from the lock.
			waitOutput(t, out, "held by second", "released by second", "free; 0 waiting")
			locktest.MustLock(t, holder(t, rdb, "third"), ctx, "k")
			waitOutput(t, out, "held by third")
			if _, err := holder(t, rdb, "ops").ForceUnlock(ctx, "k"); err != nil {
				t.Fatal(err)
			}
			waitOutput(t, out, "held by third", "force-unlocked by ops", "free; 0 waiting")
			code, errOut := stop()
			if code != exitOK {
				t.Fatalf("watch: %d %s", code, errOut)
			}
			if hint := strings.Contains(errOut, "keyspace notifications are off"); hint == notify {
				t.Fatalf("notifications %v, hint %v:\n%s", notify, hint, errOut)
			}
		})
	}
}

func TestWatchJSON(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rdb.ConfigSet(context.Background(), "notify-keyspace-events", "KA")
	out, stop := watchRun(t, "redis://"+srv.Addr, "-o", "json", "k")
	waitOutput(t, out, `"event":"state"`)
	_, unlock := locktest.MustLock(t, holder(t, rdb, "x"), context.Background(), "k")
	waitOutput(t, out, `"event":"state"`, `"label":"x"`)
	_ = unlock()
	if code, errOut := stop(); code != exitOK {
		t.Fatalf("watch: %d %s", code, errOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.seen), "\n") {
		var ev watchEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil || ev.Event == "" {
			t.Fatalf("line %q: %v", line, err)
		}
	}
}

func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	ctx := context.Background()
	c := holder(t, rdb, "on-cluster")
	var keys []string
	for i := range 12 { // spread over the masters
		k := "job:" + string(rune('a'+i))
		keys = append(keys, k)
		_, unlock := locktest.MustLock(t, c, ctx, k)
		defer unlock()
	}
	var seeds []string
	for _, m := range cl.Masters {
		seeds = append(seeds, "redis://"+m.Addr)
	}
	for _, url := range []string{strings.Join(seeds, ","), seeds[0]} { // a seed list, and one node found to be a cluster's
		code, out, errOut := lockkit(t, ctx, url, "", "ls", "job:*")
		if code != exitOK || strings.Count(out, "on-cluster") != len(keys) || !strings.Contains(out, "NODE") {
			t.Fatalf("ls on %s: %d\n%s%s", url, code, out, errOut)
		}
	}
	code, out, _ := lockkit(t, ctx, seeds[1], "", "show", keys[5])
	if code != exitOK || !strings.Contains(out, "on-cluster") {
		t.Fatalf("show on the cluster: %d\n%s", code, out)
	}
	rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.ConfigSet(ctx, "notify-keyspace-events", "Kghlx").Err()
	})
	out2, stop := watchRun(t, seeds[2], keys[5])
	waitOutput(t, out2, "held by on-cluster")
	code, out, _ = lockkit(t, ctx, seeds[0], "", "unlock", "--force", "--yes", keys[5])
	if code != exitOK || !strings.Contains(out, "ended the hold of on-cluster") {
		t.Fatalf("unlock on the cluster: %d\n%s", code, out)
	}
	waitOutput(t, out2, "held by on-cluster", "free; 0 waiting")
	if code, errOut := stop(); code != exitOK {
		t.Fatalf("watch: %d %s", code, errOut)
	}
}

func TestQuorum(t *testing.T) {
	var urls []string
	var rdbs []redis.UniversalClient
	for range 3 {
		s := redistest.Start(t)
		urls = append(urls, "redis://"+s.Addr)
		rdbs = append(rdbs, s.Client(t))
	}
	c, err := lock.NewQuorum(rdbs, lock.WithOwnerLabel("q"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, c, ctx, "k")
	defer unlock()
	url := strings.Join(urls, ",")
	code, out, errOut := lockkit(t, ctx, url, "", "-quorum", "show", "k")
	if code != exitOK || !strings.Contains(out, "held by q") || strings.Count(out, "node ") != 3 {
		t.Fatalf("show -quorum: %d\n%s%s", code, out, errOut)
	}
	code, out, _ = lockkit(t, ctx, url, "", "-quorum", "ls")
	if code != exitOK || strings.Count(out, "\nk ") < 2 || !strings.Contains(out, "NODE") { // one line per node that has it
		t.Fatalf("ls -quorum: %d\n%s", code, out)
	}
	for _, rdb := range rdbs {
		rdb.ConfigSet(ctx, "notify-keyspace-events", "Kghlx")
	}
	w, stop := watchRun(t, url, "-quorum", "k")
	waitOutput(t, w, "held by q")
	code, out, _ = lockkit(t, ctx, url, "", "-quorum", "unlock", "--force", "--yes", "k")
	if code != exitOK || !strings.Contains(out, "ended the hold of q") {
		t.Fatalf("unlock -quorum: %d\n%s", code, out)
	}
	waitOutput(t, w, "held by q", "force-unlocked by lockkit-cli", "free; 0 waiting")
	if code, errOut := stop(); code != exitOK {
		t.Fatalf("watch -quorum: %d %s", code, errOut)
	}
}

// heldOn starts a redis-server where a Client labelled label holds key
// until the test ends, and returns its URL and a client of it.
func heldOn(t *testing.T, label, key string) (string, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	_, unlock := locktest.MustLock(t, holder(t, rdb, label), context.Background(), key)
	t.Cleanup(func() { _ = unlock() })
	return "redis://" + srv.Addr, rdb
}

// lockLater locks key on c in a goroutine; the channel gets its unlock
// once c has it (nil on an error, which fails the test).
func lockLater(t *testing.T, c *lock.Client, key string) <-chan lock.UnlockFunc {
	got := make(chan lock.UnlockFunc, 1)
	go func() {
		_, unlock, err := c.Lock(context.Background(), key)
		if err != nil {
			t.Error(err)
		}
		got <- unlock
	}()
	return got
}

// lsOne runs ls -o json on the Redis of url, which holds one lock, and
// returns that lock.
func lsOne(t *testing.T, url string) jsonInfo {
	t.Helper()
	code, out, errOut := lockkit(t, context.Background(), url, "", "ls", "-o", "json")
	var got jsonInfo
	if code != exitOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("ls: %d %s %s", code, out, errOut)
	}
	return got
}
