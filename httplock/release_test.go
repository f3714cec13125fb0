package httplock_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockkit/lockkit/httplock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// The release is sent before the answer: requests for one key sent one
// after the other's answer, alternating two replicas with a Client each,
// are never turned away by the request before them.
func TestNextRequestOnAnotherReplicaNotTurnedAway(t *testing.T) {
	srv := redistest.Start(t)
	var urls [2]string
	for i := range urls {
		locker := locktest.NewClient(t, srv.Client(t))
		hs := httptest.NewServer(route("POST /orders/{id}/pay", httplock.New(locker, "orders:{id}"), ok))
		defer hs.Close()
		urls[i] = hs.URL
	}
	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	send := func(url string) int {
		resp, err := client.Post(url+"/orders/7/pay", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, u := range urls { // connections and scripts ready
		send(u)
	}
	released(t)
	const n = 60
	turnedAway := map[int]int{}
	for i := range n {
		if code := send(urls[i%2]); code != http.StatusOK {
			turnedAway[code]++
		}
	}
	if len(turnedAway) != 0 {
		t.Errorf("of %d requests sent one after the other's answer, alternating replicas, %v were turned away", n, turnedAway)
	}
	released(t)
}
