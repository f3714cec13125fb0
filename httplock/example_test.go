package httplock_test

// ExampleNew takes locks: it needs a Redis on localhost:6379, so go test
// compiles it without running it.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/lock"
)

func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	mux := http.NewServeMux()
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.Context() holds the lock on "orders:" + r.PathValue("id").
		fmt.Fprintln(w, "paid", httplock.Key(r))
	})
	mux.Handle("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}")(pay))

	// Another replica is paying order 42 right now.
	_, unlock, _ := locker.Lock(context.Background(), "orders:42")
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Header().Get("Content-Type"), "Retry-After:", w.Header().Get("Retry-After"))

	_ = unlock()
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Print(w.Code, " ", w.Body)
	// Prints:
	// 409 application/problem+json Retry-After: 1
	// 200 paid orders:42
}

func ExampleValidate() {
	fmt.Println(httplock.Validate("tenants:{header.X-Tenant}:reports:{query.year}"))
	fmt.Println(httplock.Validate("orders:{id"))
	// Output:
	// <nil>
	// httplock: template "orders:{id": '{' at byte 7 is not closed
}
