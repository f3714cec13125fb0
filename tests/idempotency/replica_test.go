package idempotency_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/lock"
)

// replicaEnv carries a child process's replicaConfig, as JSON: the test
// binary run with it (locktest.StartChild) is a replica of the payment
// service and runs no test.
const replicaEnv = "LOCKKIT_IDEM_REPLICA"

// payRoute is the payment service's one idempotent route.
const payRoute = "POST /orders/{id}/pay"

// delayHeader asks the handler to take this many milliseconds between
// announcing its run to the bank and paying: the test's stand-in for a
// slow payment. It is not part of the request's fingerprint (headers are
// not), so duplicates of one request may carry it alike.
const delayHeader = "X-Delay-Ms"

// replicaConfig is what a replica process is started with.
type replicaConfig struct {
	Name         string        // "r0", "r1", ...: named in the bank's records and the receipts
	Dir          string        // where it writes Name.addr (its listening address) and Name.log
	Redis        string        // the redis-server's address
	Bank         string        // the bank's base URL
	Lease        time.Duration // the lock Client's default lease
	StoreTimeout time.Duration // httplock.WithStoreTimeout; 0: the default
	// ContextTimeout gives the replica's go-redis client
	// ContextTimeoutEnabled, under which go-redis itself ends a call at
	// its context's deadline; without it, only its ReadTimeout (3 s) does.
	ContextTimeout bool
}

// runReplica runs the replica its environment asks for, if any, and
// reports whether it did. A replica listens on a free loopback port,
// writes the address to Dir/Name.addr, says "serving" on stdout and
// serves until it is killed. Besides the payment route it answers
// GET /outcomes with the count of each Idempotency outcome so far.
func runReplica() bool {
	v := os.Getenv(replicaEnv)
	if v == "" {
		return false
	}
	if err := serveReplica(v); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	return true
}

func serveReplica(v string) error {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(v), &cfg); err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(cfg.Dir, cfg.Name+".log"))
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis, ContextTimeoutEnabled: cfg.ContextTimeout})
	c, err := lock.New(rdb, lock.WithDefaultLease(cfg.Lease), lock.WithLogger(logger))
	if err != nil {
		return err
	}
	outcomes := &outcomeCounts{n: map[string]int{}}
	opts := []httplock.IdempotencyOption{
		httplock.WithKeyRequired(),
		httplock.WithLogger(logger),
		httplock.WithOutcome(outcomes.add),
	}
	if cfg.StoreTimeout > 0 {
		opts = append(opts, httplock.WithStoreTimeout(cfg.StoreTimeout))
	}
	idem := httplock.Idempotent(c, rdb, opts...)
	mux := http.NewServeMux()
	mux.Handle(payRoute, idem(&payService{name: cfg.Name, bank: cfg.Bank, client: &http.Client{}}))
	mux.Handle("GET /outcomes", outcomes)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, cfg.Name+".addr"), []byte(ln.Addr().String()), 0o600); err != nil {
		return err
	}
	fmt.Println("serving")
	return http.Serve(ln, mux)
}

// receipt is the payment service's answer to a payment, 201 Created.
type receipt struct {
	Order   string `json:"order"`
	Payment string `json:"payment"` // the bank's payment id
	Replica string `json:"replica"` // the replica whose handler paid
	Amount  int    `json:"amount"`
}

// payService is the handler of payRoute, naive on purpose: it pays
// whenever it runs, and leaves "once per key" to the middleware. It
// tells the bank it began (the bank may hold it there), waits the
// request's delayHeader, pays, and answers 201 with the receipt and a
// Location naming the payment.
type payService struct {
	name   string
	bank   string
	client *http.Client
}

func (s *payService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Amount int `json:"amount"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	order := r.PathValue("id")
	// A payment begun is finished even when the client has gone away.
	ctx := context.WithoutCancel(r.Context())
	if _, err := s.call(ctx, "/begin", bankCall{Order: order, Replica: s.name}); err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if ms, err := strconv.Atoi(r.Header.Get(delayHeader)); err == nil && ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	id, err := s.call(ctx, "/payments", bankCall{Order: order, Replica: s.name, Amount: req.Amount})
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", "/payments/"+id)
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(receipt{Order: order, Payment: id, Replica: s.name, Amount: req.Amount})
}

// call posts body to the bank's path and returns the payment id it
// answers, if any.
func (s *payService) call(ctx context.Context, path string, body bankCall) (string, error) {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.bank+path, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("bank %s: %s", path, resp.Status)
	}
	var out struct {
		Payment string `json:"payment"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return out.Payment, nil
}

// outcomeCounts counts the middleware's outcomes (httplock.WithOutcome)
// and serves them as a JSON object.
type outcomeCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomeCounts) add(_ context.Context, outcome string) {
	o.mu.Lock()
	o.n[outcome]++
	o.mu.Unlock()
}

func (o *outcomeCounts) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(o.n)
}
