package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// StartReplica starts redis-server as a replica of primary, plus extra
// config args, and waits until its link to the primary is up and the
// primary counts it online (so that WAIT counts it). It is stopped when
// the test ends.
func StartReplica(tb testing.TB, primary *Server, args ...string) *Server {
	tb.Helper()
	s := Start(tb, append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(primary.Port)}, args...)...)
	rdb, prdb := s.Client(tb), primary.Client(tb)
	deadline := time.Now().Add(10 * time.Second)
	online := "port=" + strconv.Itoa(s.Port) + ",state=online"
	for {
		info, err := rdb.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			var pinfo string
			pinfo, err = prdb.Info(context.Background(), "replication").Result()
			if err == nil && strings.Contains(pinfo, online) {
				return s
			}
			info += pinfo
		}
		if time.Now().After(deadline) {
			tb.Fatalf("replica %s of %s: link not up within 10 s: %v\n%s", s.Addr, primary.Addr, err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Failover asks the Sentinel at sentinelAddr to fail master over to a
// replica. Sentinel refuses with NOGOODSLAVE until its own view of a
// replica is fresh (it refreshes it every few seconds), so Failover asks
// again until it accepts, for up to 10 s.
func Failover(tb testing.TB, sentinelAddr, master string) {
	tb.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinelAddr})
	defer sc.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := sc.Failover(context.Background(), master).Err()
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "NOGOODSLAVE") || time.Now().After(deadline) {
			tb.Fatalf("SENTINEL FAILOVER %s: %v", master, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
