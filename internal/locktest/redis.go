package locktest

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
)

// Redis is a real redis-server started for one test, with a few direct
// reads and writes of its data that fail the test on error. It is stopped
// when the test ends.
type Redis struct {
	*redistest.Server
	t   testing.TB
	rdb *redis.Client // the helpers' own connection, not the code's under test
}

// NewRedis starts a redis-server on a free loopback port (see
// [redistest.Start]) and returns it with a go-redis client of it for the
// code under test. Both end when the test ends.
func NewRedis(t testing.TB) (*Redis, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	r := &Redis{Server: srv, t: t, rdb: srv.Client(t)}
	return r, srv.Client(t)
}

// Close stops the server, as a crash of Redis would look to its clients.
func (r *Redis) Close() { r.Stop() }

func (r *Redis) check(err error) {
	r.t.Helper()
	if err != nil && !errors.Is(err, redis.Nil) {
		r.t.Fatalf("redis: %v", err)
	}
}

// Keys returns every key, sorted.
func (r *Redis) Keys() []string {
	r.t.Helper()
	keys, err := r.rdb.Keys(context.Background(), "*").Result()
	r.check(err)
	sort.Strings(keys)
	return keys
}

// TTL returns key's remaining time to live, 0 when it has none or does
// not exist.
func (r *Redis) TTL(key string) time.Duration {
	r.t.Helper()
	d, err := r.rdb.PTTL(context.Background(), key).Result()
	r.check(err)
	if d < 0 {
		return 0
	}
	return d
}

// SetTTL sets key's time to live.
func (r *Redis) SetTTL(key string, d time.Duration) {
	r.t.Helper()
	r.check(r.rdb.PExpire(context.Background(), key, d).Err())
}

// HGet returns a field of a hash, "" when there is none.
func (r *Redis) HGet(key, field string) string {
	r.t.Helper()
	v, err := r.rdb.HGet(context.Background(), key, field).Result()
	r.check(err)
	return v
}

// HSet sets fields of a hash: field, value, field, value ...
func (r *Redis) HSet(key string, fieldValues ...string) {
	r.t.Helper()
	args := make([]any, len(fieldValues))
	for i, v := range fieldValues {
		args[i] = v
	}
	r.check(r.rdb.HSet(context.Background(), key, args...).Err())
}

// Lpush pushes value at the head of a list and returns the list's length.
func (r *Redis) Lpush(key, value string) (int, error) {
	n, err := r.rdb.LPush(context.Background(), key, value).Result()
	return int(n), err
}

// Exists reports whether key exists.
func (r *Redis) Exists(key string) bool {
	r.t.Helper()
	n, err := r.rdb.Exists(context.Background(), key).Result()
	r.check(err)
	return n == 1
}

// Del deletes key and reports whether it existed.
func (r *Redis) Del(key string) bool {
	r.t.Helper()
	n, err := r.rdb.Del(context.Background(), key).Result()
	r.check(err)
	return n == 1
}

// FlushAll deletes every key, as a restart without persistence would.
func (r *Redis) FlushAll() {
	r.t.Helper()
	r.check(r.rdb.FlushAll(context.Background()).Err())
}

// PubSubChannels returns the channels matching pattern that have a
// subscriber.
func (r *Redis) PubSubChannels(pattern string) []string {
	r.t.Helper()
	chans, err := r.rdb.PubSubChannels(context.Background(), pattern).Result()
	r.check(err)
	return chans
}

// expireBy ends every key whose time to live is at most ARGV[1] ms and
// takes that much from the others, in one step.
var expireBy = redis.NewScript(`
local gone = 0
for _, k in ipairs(redis.call('KEYS', '*')) do
	local ttl = redis.call('PTTL', k)
	if ttl >= 0 then
		if ttl <= tonumber(ARGV[1]) then
			redis.call('DEL', k)
			gone = gone + 1
		else
			redis.call('PEXPIRE', k, ttl - tonumber(ARGV[1]))
		end
	end
end
return gone`)

// FastForward makes d pass for the keys' times to live at once: keys
// that would expire within d are deleted, the others' TTLs shortened by
// d. Redis's clock (TIME) and the clients' clocks are not changed.
func (r *Redis) FastForward(d time.Duration) {
	r.t.Helper()
	r.check(expireBy.Run(context.Background(), r.rdb, nil, d.Milliseconds()).Err())
}
