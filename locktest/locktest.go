// Package locktest helps test code that uses package lock without a Redis
// server: [NewServer] starts an embedded Redis (miniredis) that several
// [*lock.Client]s share, as the replicas of a service share one Redis;
// [Server.FastForward] moves its clock so that leases lapse; [Lose] makes
// a held lock be lost, so that the code's handling of [lock.ErrLost] runs;
// and [Contend] runs a function from many goroutines at once. [New] is the
// short form for a test that needs one Client.
//
//	func TestCharge(t *testing.T) {
//		locker := locktest.New(t)
//		locktest.Contend(t, 8, func(i int) error {
//			return charge(context.Background(), locker, "orders:42")
//		})
//		// assert the order was charged once
//	}
//
// The embedded Redis runs the same scripts as a real one, so locking,
// re-entry, waiting in turn and fencing tokens behave as in production.
// Its keys expire only when [Server.FastForward] moves its clock, never
// as time passes. Timing under load, pub/sub delays and failover are for
// tests against a real Redis.
package locktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/lock"
)

// Server is an embedded Redis shared by the Clients of one test. Create it
// with [NewServer] in a test, or [StartServer] elsewhere.
type Server struct {
	t  testing.TB // nil for StartServer's
	mr *miniredis.Miniredis

	mu      sync.Mutex
	closers []func() // Clients and go-redis clients, closed in reverse
}

// NewServer starts an embedded Redis on a free loopback port. It is
// closed when the test ends, with every Client of [Server.Client] first.
func NewServer(t testing.TB) *Server {
	t.Helper()
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		t.Fatalf("locktest: start an embedded Redis: %v", err)
	}
	s := &Server{t: t, mr: mr}
	t.Cleanup(s.Close)
	return s
}

// StartServer starts an embedded Redis outside a test (an example, a
// program's demo mode). Close it when done.
func StartServer() (*Server, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		return nil, fmt.Errorf("locktest: start an embedded Redis: %w", err)
	}
	return &Server{mr: mr}, nil
}

// Close closes every Client and go-redis client made by the server, then
// the server. Closing a closed Server does nothing.
func (s *Server) Close() {
	s.mu.Lock()
	closers := s.closers
	s.closers = nil
	s.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	s.mr.Close()
}

func (s *Server) onClose(f func()) {
	s.mu.Lock()
	s.closers = append(s.closers, f)
	s.mu.Unlock()
}

// Addr is the server's host:port, for a go-redis client of your own.
func (s *Server) Addr() string { return s.mr.Addr() }

// Redis returns a go-redis client of the server, closed with it: for code
// that takes a Redis client rather than a [lock.Locker].
func (s *Server) Redis() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.mr.Addr()})
	s.onClose(func() { _ = rdb.Close() })
	return rdb
}

// Client returns a new lock Client on the server, with opts: one replica
// of the service under test. Call it once per replica; every Client has
// owners of its own, so two of them contend for a key as two processes
// would. The Client is closed with the server. Invalid opts fail the test
// (they panic on a server of [StartServer]).
func (s *Server) Client(opts ...lock.Option) *lock.Client {
	if s.t != nil {
		s.t.Helper()
	}
	rdb := s.Redis()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		err = fmt.Errorf("locktest: lock.New: %w", err)
		if s.t == nil {
			panic(err)
		}
		s.t.Fatalf("%v", err)
	}
	s.onClose(func() { _ = c.Close() })
	return c
}

// FastForward moves the server's clock by d: every key whose time to live
// is at most d expires now, as when a lease lapses in Redis. A holder
// whose lease lapsed learns it at its next renewal (a third of the lease
// later, by the process's own clock): its lock context is then cancelled
// with cause [lock.ErrLost]. Only Redis's view of time moves; the
// process's timers do not.
func (s *Server) FastForward(d time.Duration) { s.mr.FastForward(d) }

// New returns a Client on an embedded Redis of its own, with opts: the
// same as NewServer(t).Client(opts...). It fails the test if opts are
// invalid.
func New(t testing.TB, opts ...lock.Option) *lock.Client {
	t.Helper()
	return NewServer(t).Client(opts...)
}

// Lose makes the hold of key be lost, as when its lease ends in Redis
// (it uses [lock.Client.ForceUnlock]): when client is the holder's
// Client, the lock contexts of key are cancelled with cause
// [lock.ErrLost] before Lose returns; their unlock functions return
// ErrLost, and the key goes to the next waiter, with a larger fencing
// token. It fails the test when no one holds key.
func Lose(t testing.TB, client *lock.Client, key string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := client.ForceUnlock(ctx, key); err != nil {
		t.Fatalf("locktest: Lose(%q): %v", key, err)
	}
}

// Contend runs f(i) for i in [0, n) from n goroutines started together,
// waits for all of them, and fails the test with every error f returned.
// Use it to check that code under a lock stays correct when many callers
// want the lock at once.
func Contend(t testing.TB, n int, f func(i int) error) {
	t.Helper()
	if n < 1 {
		t.Fatalf("locktest: Contend with %d goroutines", n)
	}
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("locktest: Contend: %v", err)
	}
}
