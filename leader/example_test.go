package leader_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/leader"
	"github.com/lockkit/lockkit/lock"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locker, err := lock.New(rdb, lock.WithOwnerLabel("replica-1"))
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	err = leader.Run(ctx, locker, "reconciler", func(ctx context.Context) error {
		// Leading: ctx ends when leadership is lost or Run's ctx ends.
		// Writes carry the term's fencing token for storage to check.
		token, _ := lock.FencingToken(ctx, leader.Key("reconciler"))
		info, _ := leader.Current(ctx, locker, "reconciler") // any replica may ask
		fmt.Println("leader:", info.Leader.Label, "token:", token == info.Token)
		shutdown() // Run resigns: the next replica leads at once
		return nil
	})
	fmt.Println("Run:", err)
	info, _ := leader.Current(context.Background(), locker, "reconciler")
	fmt.Println("led after the shutdown:", info.Led)
}
