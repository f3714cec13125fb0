package httplock

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/lockkit/lockkit/internal/locktest"
)

// benchIdempotent serves b.N requests on a real Redis, with the key that
// key(i) returns for the i-th, and reports the commands each sent: to
// the answers' Redis client (store-cmds/op) and to the lock Client's
// (lock-cmds/op).
func benchIdempotent(b *testing.B, key func(i int) string) {
	srv, rdb := locktest.NewRedis(b)
	lockRdb := srv.Client(b)
	locker := locktest.NewClient(b, lockRdb)
	m, err := NewIdempotency(locker, rdb)
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(payRoute, m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"paid":true}`))
	})))
	serve(mux, pay("1", "warm-up", `{"amount":5}`)) // loads the scripts
	store, locks := locktest.CountCommands(rdb), locktest.CountCommands(lockRdb)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if w := serve(mux, pay("1", key(i), `{"amount":5}`)); w.Code != http.StatusCreated {
			b.Fatalf("answer %d", w.Code)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(store.N())/float64(b.N), "store-cmds/op")
	b.ReportMetric(float64(locks.N())/float64(b.N), "lock-cmds/op")
}

// A first request: read, lock, read again, run, store, release.
func BenchmarkIdempotentFirst(b *testing.B) {
	benchIdempotent(b, func(i int) string { return "key-" + strconv.Itoa(i) })
}

// A retry: one read, the stored answer replayed.
func BenchmarkIdempotentReplay(b *testing.B) {
	benchIdempotent(b, func(int) string { return "warm-up" })
}
