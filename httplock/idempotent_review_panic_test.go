package httplock

import (
	"context"
	"io"
	"net/http"
	"testing"
)

// TestIdempotentReviewStatusFilterPanicReleases runs a handler whose
// answer the app's status filter ([WithStoredStatus]) panics on, after
// the handler returned: the panic goes on, as the handler's own would,
// and the run lock is released, not kept (and renewed) until the lock
// Client closes: a retry of the request runs again instead of getting
// 409 forever.
func TestIdempotentReviewStatusFilterPanicReleases(t *testing.T) {
	e := newIdemEnv(t)
	h := e.mux(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "paid")
	}, WithStoredStatus(func(status int) bool { panic("the app's filter failed") }))
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the filter's panic did not go on")
			}
		}()
		serve(h, pay("1", "k", ""))
	}()
	waitReleased(t)
	_, run := keys(DefaultKeyPrefix, "POST", payRoute, "", "k")
	_, unlock, err := e.locker.TryLock(context.Background(), run)
	if err != nil {
		t.Fatalf("the run lock is held after the filter panicked: %v", err)
	}
	_ = unlock()
}
