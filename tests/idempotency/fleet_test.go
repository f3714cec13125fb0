package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// replicas is how many replica processes of the payment service a fleet
// runs.
const replicas = 3

// fleet is a real redis-server, the bank, and the replica processes of
// the payment service, all on loopback, ended when the test ends.
type fleet struct {
	t      testing.TB
	redis  *locktest.Redis
	rdb    *redis.Client // the test's own client of redis
	bank   *bank
	dir    string
	urls   []string // replica i's base URL
	procs  []*exec.Cmd
	client *http.Client
	proxy  *locktest.Proxy // between replica 0 and Redis, with fleetConfig.proxied
}

// fleetConfig sets the replicas' lock lease, store timeout (0:
// httplock's default), whether
// their go-redis clients have ContextTimeoutEnabled (always with
// LOCKKIT_CONTEXT_TIMEOUT=1), and whether replica 0 reaches Redis
// through a proxy.
type fleetConfig struct {
	lease          time.Duration
	storeTimeout   time.Duration
	contextTimeout bool
	proxied        bool // replica 0 reaches Redis through a locktest.Proxy
}

// startFleet starts Redis, the bank and the replicas. When the test
// fails, the replicas' logs are written to its output.
func startFleet(t testing.TB, cfg fleetConfig) *fleet {
	t.Helper()
	r, rdb := locktest.NewRedis(t)
	f := &fleet{t: t, redis: r, rdb: rdb, bank: newBank(t), dir: t.TempDir()}
	f.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	t.Cleanup(f.client.CloseIdleConnections)
	t.Cleanup(f.dumpLogs)
	if cfg.proxied {
		f.proxy = locktest.StartProxy(t, r.Addr)
	}
	for i := range replicas {
		redisAddr := r.Addr
		if i == 0 && f.proxy != nil {
			redisAddr = f.proxy.Addr()
		}
		rc := replicaConfig{
			Name: replicaName(i), Dir: f.dir, Redis: redisAddr, Bank: f.bank.URL,
			Lease: cfg.lease, StoreTimeout: cfg.storeTimeout,
			ContextTimeout: cfg.contextTimeout || redistest.ContextTimeout(),
		}
		env, _ := json.Marshal(rc)
		f.procs = append(f.procs, locktest.StartChild(t, replicaEnv+"="+string(env), "serving"))
		addr, err := os.ReadFile(filepath.Join(f.dir, rc.Name+".addr"))
		if err != nil {
			t.Fatalf("replica %s: %v", rc.Name, err)
		}
		f.urls = append(f.urls, "http://"+string(addr))
	}
	return f
}

func replicaName(i int) string { return fmt.Sprintf("r%d", i) }

// dumpLogs writes the replicas' logs (their last 4 KiB each) to a failed
// test's output.
func (f *fleet) dumpLogs() {
	if !f.t.Failed() {
		return
	}
	for i := range f.urls {
		b, _ := os.ReadFile(filepath.Join(f.dir, replicaName(i)+".log"))
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		f.t.Logf("replica %s log (tail):\n%s", replicaName(i), b)
	}
}

// logs returns the replicas' logs, all of them.
func (f *fleet) logs() string {
	var b strings.Builder
	for i := range f.urls {
		l, _ := os.ReadFile(filepath.Join(f.dir, replicaName(i)+".log"))
		b.Write(l)
	}
	return b.String()
}

// commands returns how many times Redis ran each command so far (INFO
// commandstats), scripts' own calls included, as "name=calls" sorted by
// name, and the sum.
func (f *fleet) commands() (string, int) {
	f.t.Helper()
	info, err := f.rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		f.t.Fatalf("INFO commandstats: %v", err)
	}
	var out []string
	sum := 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "info" {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(rest, "%d", &n); err == nil {
			out = append(out, fmt.Sprintf("%s=%d", name, n))
			sum += n
		}
	}
	sort.Strings(out)
	return strings.Join(out, " "), sum
}

// outcomes returns the Idempotency outcomes counted by every replica
// still running, summed.
func (f *fleet) outcomes() map[string]int {
	f.t.Helper()
	sum := map[string]int{}
	for i := range f.urls {
		if f.procs[i].ProcessState != nil {
			continue // killed and waited for
		}
		for k, v := range f.outcomesOf(i) {
			sum[k] += v
		}
	}
	return sum
}

// outcomesOf returns the Idempotency outcomes counted by replica i.
func (f *fleet) outcomesOf(i int) map[string]int {
	f.t.Helper()
	resp, err := f.client.Get(f.urls[i] + "/outcomes")
	if err != nil {
		f.t.Fatalf("outcomes of %s: %v", replicaName(i), err)
	}
	defer resp.Body.Close()
	var n map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil {
		f.t.Fatalf("outcomes of %s: %v", replicaName(i), err)
	}
	return n
}

// request is one client request to the payment route.
type request struct {
	order   int
	replica int
	key     string // the Idempotency-Key, sent as an sf-string or bare (see quoted)
	quoted  bool
	amount  int
	path    string        // "" -> /orders/{order}/pay
	delay   time.Duration // delayHeader
	timeout time.Duration // the client's: 0 -> clientPatience
}

// clientPatience bounds a request whose client does not time out on
// purpose: far above any answer's time, so that none is cut short.
var clientPatience = locktest.Bound(10 * time.Second)

// answer is what one request got.
type answer struct {
	request
	phase  string // the workload step that sent it (see order.go)
	status int    // 0 when err is set
	header http.Header
	body   []byte
	err    error // a transport error or the client's timeout
	sent   time.Time
	got    time.Time
}

func (a answer) replayed() bool { return a.header.Get("Idempotent-Replayed") == "true" }

// fresh reports whether a is the answer of a handler run: 201, not
// replayed.
func (a answer) fresh() bool { return a.status == http.StatusCreated && !a.replayed() }

func (a answer) String() string {
	if a.err != nil {
		return fmt.Sprintf("%s order %d to %s: %v", a.phase, a.order, replicaName(a.replica), a.err)
	}
	return fmt.Sprintf("%s order %d to %s: %d replayed=%v retry-after=%q %s", a.phase, a.order, replicaName(a.replica),
		a.status, a.replayed(), a.header.Get("Retry-After"), bytes.TrimSpace(a.body))
}

// pay sends r to its replica and returns the answer.
func (f *fleet) pay(r request, phase string) answer {
	path := r.path
	if path == "" {
		path = fmt.Sprintf("/orders/%d/pay", r.order)
	}
	timeout := r.timeout
	if timeout == 0 {
		timeout = clientPatience
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a := answer{request: r, phase: phase, sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.urls[r.replica]+path,
		strings.NewReader(fmt.Sprintf(`{"amount":%d}`, r.amount)))
	if err != nil {
		a.err = err
		return a
	}
	key := r.key
	if r.quoted {
		key = `"` + key + `"`
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	if r.delay > 0 {
		req.Header.Set(delayHeader, fmt.Sprint(r.delay.Milliseconds()))
	}
	resp, err := f.client.Do(req)
	if err == nil {
		a.body, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		a.status, a.header = resp.StatusCode, resp.Header
	}
	if err != nil {
		a.status, a.err = 0, err
	}
	a.got = time.Now()
	return a
}
