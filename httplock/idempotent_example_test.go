package httplock_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/lock"
)

// A payment route that runs once per Idempotency-Key: the client's retry
// gets the first answer again, marked as replayed. (It needs a Redis on
// localhost:6379, so go test compiles it without running it.)
func ExampleIdempotent() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	idempotent := httplock.Idempotent(locker, rdb, httplock.WithKeyRequired())
	mux := http.NewServeMux()
	mux.Handle("POST /orders/{id}/pay", idempotent(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "paid order %s\n", r.PathValue("id"))
	})))

	for range 2 { // the request, then the client's retry
		r := httptest.NewRequest(http.MethodPost, "/orders/42/pay", strings.NewReader(`{"amount":5}`))
		r.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		fmt.Printf("%d replayed=%q %s", w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	// Prints:
	// 201 replayed="" paid order 42
	// 201 replayed="true" paid order 42
}
