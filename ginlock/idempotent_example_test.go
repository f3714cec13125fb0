package ginlock_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/lock"
)

// A payment route that runs once per user and Idempotency-Key: the
// client's retry gets the first answer again, marked as replayed.
func ExampleIdempotent() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, err := lock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	r := gin.New()
	auth := func(c *gin.Context) { c.Set("user", "alice") } // the app's authentication
	user := ginlock.IdempotencyScope(func(c *gin.Context) string { return c.GetString("user") })
	r.POST("/orders/:id/pay", auth, ginlock.Idempotent(locker, rdb, user, httplock.WithKeyRequired()),
		func(c *gin.Context) {
			c.String(http.StatusCreated, "paid order %s", c.Param("id"))
		})

	for range 2 { // the request, then the client's retry
		req := httptest.NewRequest(http.MethodPost, "/orders/42/pay", strings.NewReader(`{"amount":5}`))
		req.Header.Set("Idempotency-Key", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Printf("%d replayed=%q %s\n", w.Code, w.Header().Get("Idempotent-Replayed"), w.Body)
	}
	// Prints:
	// 201 replayed="" paid order 42
	// 201 replayed="true" paid order 42
}
