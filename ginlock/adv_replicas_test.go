package ginlock_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/ginlock"
	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock"
)

// advReplicaEnv makes the test binary a replica of its own process
// instead of running tests: "redisAddr,port" (see serveReplica).
const advReplicaEnv = "LOCKKIT_ADV_REPLICA"

func init() {
	if v := os.Getenv(advReplicaEnv); v != "" {
		os.Exit(serveReplica(v))
	}
}

// serveReplica serves POST /orders/:id/pay under ginlock.New on the
// loopback port of spec, with a lock Client of the Redis at its address,
// until killed.
func serveReplica(spec string) int {
	addr, port, _ := strings.Cut(spec, ",")
	gin.SetMode(gin.ReleaseMode)
	locker, err := lock.New(redis.NewClient(&redis.Options{Addr: addr}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locker, "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
	ln, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("serving")
	_ = http.Serve(ln, r)
	return 1
}

// The lock is held exactly while the handler chain runs: a client whose
// request was answered, and that sends its next request for the same key
// through another replica (another process, as behind a load balancer),
// is never turned away by the request it already has the answer to.
func TestNextRequestOnAnotherReplicaNotTurnedAway(t *testing.T) {
	srv := redistest.Start(t)
	r := gin.New()
	r.POST("/orders/:id/pay", ginlock.New(locktest.NewClient(t, srv.Client(t)), "orders:{id}"), func(c *gin.Context) { c.Status(http.StatusOK) })
	local := httptest.NewServer(r)
	defer local.Close()
	port := redistest.FreePort(t)
	locktest.StartChild(t, advReplicaEnv+"="+srv.Addr+","+strconv.Itoa(port), "serving")
	urls := [2]string{local.URL, "http://127.0.0.1:" + strconv.Itoa(port)}
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
		for range 3 {
			send(u)
			time.Sleep(50 * time.Millisecond)
		}
	}
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
