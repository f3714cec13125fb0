package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/examples/internal/embedded"
)

func TestEmbeddedKeysExpireInRealTime(t *testing.T) {
	opt, stop, err := embedded.Redis("")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Set(ctx, "k", "v", 100*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for rdb.Exists(ctx, "k").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("key with a 100 ms TTL still there after 2 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestURL(t *testing.T) {
	opt, stop, err := embedded.Redis("redis://127.0.0.1:6390/2")
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if opt.Addr != "127.0.0.1:6390" || opt.DB != 2 {
		t.Fatalf("options %+v", opt)
	}
	if _, _, err := embedded.Redis("http://nope"); err == nil {
		t.Fatal("bad URL accepted")
	}
}
