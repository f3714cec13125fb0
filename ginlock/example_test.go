package ginlock_test

// The examples that take locks need a Redis on localhost:6379, so go test
// compiles them without running them.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/lock"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) {
		c.String(http.StatusOK, "paid")
	})

	// Another replica is paying order 42 right now.
	_, unlock, _ := locker.Lock(context.Background(), "orders:42")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Header().Get("Content-Type"), "Retry-After:", w.Header().Get("Retry-After"))

	_ = unlock()
	w = httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/orders/42/pay", nil))
	fmt.Println(w.Code, w.Body)
	// Prints:
	// 409 application/problem+json Retry-After: 1
	// 200 paid
}

func ExampleValidate() {
	fmt.Println(ginlock.Validate("tenants:{header.X-Tenant}:reports:{query.year}"))
	fmt.Println(ginlock.Validate("orders:{id"))
	// Output:
	// <nil>
	// ginlock: template "orders:{id": '{' at byte 7 is not closed
}

func ExampleWithValue() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	authenticate := func(c *gin.Context) { c.Set("user", "ada") }
	currentUser := func(c *gin.Context) string { return c.GetString("user") }

	r := gin.New()
	r.POST("/reports", authenticate,
		ginlock.New(locker, "reports:{value.user}", ginlock.WithValue("user", currentUser)),
		func(c *gin.Context) {
			fmt.Println("holds reports:ada:", lock.Held(c.Request.Context(), "reports:ada"))
		})
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/reports", nil))
	// Prints: holds reports:ada: true
}

func ExampleWithWait() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	r := gin.New()
	// A retried request waits up to 2 s for the first one to finish
	// instead of getting 409 at once; the lease is 10 s.
	r.PUT("/documents/:id", ginlock.New(locker, "documents:{id}",
		ginlock.WithWait(2*time.Second),
		ginlock.WithLockOptions(lock.WithLease(10*time.Second)),
	), func(c *gin.Context) { c.Status(http.StatusNoContent) })

	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodPut, "/documents/7", nil))
	fmt.Println(w.Code)
	// Prints: 204
}

func ExampleLimit() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, _ := lock.New(rdb)
	defer locker.Close()

	r := gin.New()
	// At most 3 report generations per tenant at a time, across replicas.
	r.POST("/reports", ginlock.Limit(locker, "reports:{header.X-Tenant}", 3), func(c *gin.Context) {
		c.String(http.StatusOK, "report")
	})

	// Other replicas run 3 reports of tenant acme right now.
	for range 3 {
		_, unlock, _ := locker.Acquire(context.Background(), "reports:acme", 3)
		defer unlock()
	}
	req := httptest.NewRequest(http.MethodPost, "/reports", nil)
	req.Header.Set("X-Tenant", "acme")
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	fmt.Println(w.Code, w.Header().Get("Content-Type"), "Retry-After:", w.Header().Get("Retry-After"))
	// Prints: 429 application/problem+json Retry-After: 1
}
