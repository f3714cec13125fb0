package lock

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockkit/lockkit/internal/redistest"
	"github.com/lockkit/lockkit/lock/internal/protocol"
	"github.com/lockkit/lockkit/lock/internal/scripts"
)

// The scripts, as the lock package assembles them, against the protocol
// model: every event of a case or random sequence runs on a real Redis
// and in the model from the same data, and the data, the reply and the
// messages each Client's channel received must agree. Time passing is
// played on Redis by moving every TTL and stored moment back (see
// crossCheck.lapse); the scripts read Redis's clock themselves, so the
// model runs at Redis's time just before or just after the call,
// whichever agrees, with the call's duration as tolerance.

// slack is the tolerance (ms) of a moment read from Redis besides the
// duration of the call: a busy machine may pause redis-server between
// the TIME and the PTTL of one read.
const slack = 10

var crossSeqs = flag.Int("protocol.sequences", 200, "random event sequences of TestScriptsFollowTheModelRandomly")

func TestScriptsFollowTheModel(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	for i, c := range protocol.Cases {
		t.Run(c.Name, func(t *testing.T) {
			claim := int64(protocol.CaseClaim)
			if c.NoQueue {
				claim = 0
			}
			x := newCrossCheck(t, rdb, fmt.Sprintf("case%d", i), claim, 7)
			for j, op := range c.Ops {
				if err := x.apply(op); err != nil {
					t.Fatalf("event %d of %v: %v", j, c.Ops, err)
				}
			}
		})
	}
}

func TestScriptsFollowTheModelRandomly(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	seed := rand.Uint64()
	const steps = 30
	for i := range *crossSeqs {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		clients := 3 + r.IntN(3)
		claim := int64(protocol.CaseClaim)
		if i%8 == 7 {
			claim = 0 // quorum mode's calls: no queue
		}
		x := newCrossCheck(t, rdb, fmt.Sprintf("seq%d", i), claim, clients)
		x.lease = protocol.RandomLease(r)
		var ops []protocol.Op
		for range steps {
			op := protocol.RandomOp(r, x.world(), clients)
			ops = append(ops, op)
			if err := x.apply(op); err != nil {
				t.Fatalf("seed %d, sequence %d, events %v: %v", seed, i, ops, err)
			}
		}
		x.close()
	}
}

// TestScriptsFollowTheModelShared runs random sequences of shared holds
// (see protocol.RandomShareOp) through share.lua, renew.lua and, for a
// key that starts as a Lock's, acquire.lua.
func TestScriptsFollowTheModelShared(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	seed := rand.Uint64()
	const steps = 30
	for i := range *crossSeqs {
		r := rand.New(rand.NewPCG(seed, uint64(i)))
		clients := 3 + r.IntN(3)
		setup := protocol.RandomShareSetup(r)
		x := newCrossCheck(t, rdb, fmt.Sprintf("share%d", i), protocol.CaseClaim, clients)
		x.lease = protocol.RandomLease(r)
		var ops []protocol.Op
		for range steps {
			op := protocol.RandomShareOp(r, x.world(), clients, setup)
			ops = append(ops, op)
			if err := x.apply(op); err != nil {
				t.Fatalf("seed %d, sequence %d (%+v), events %v: %v", seed, i, setup, ops, err)
			}
		}
		x.close()
	}
}

// A crossCheck runs events on one key in Redis and in the model.
type crossCheck struct {
	t     *testing.T
	rdb   *redis.Client
	rk    redisKeys
	claim int64
	lease int64
	subs  map[string]*redis.PubSub // by Client; "" the key's own channel
	dead  map[string]bool          // Clients unsubscribed
	stop  map[string]bool          // Clients subscribed that make no calls
	shift int64                    // ms of time played by moving Redis's data back
}

func newCrossCheck(t *testing.T, rdb *redis.Client, key string, claim int64, clients int) *crossCheck {
	x := &crossCheck{t: t, rdb: rdb, rk: tagKeys("pc", key), claim: claim, lease: protocol.CaseLease,
		subs: map[string]*redis.PubSub{}, dead: map[string]bool{}, stop: map[string]bool{}}
	t.Cleanup(x.close)
	names := []string{""}
	for i := 1; i <= clients; i++ {
		names = append(names, "c"+strconv.Itoa(i))
	}
	for _, c := range names {
		ps := x.rdb.Subscribe(context.Background(), x.channel(c))
		if _, err := ps.Receive(context.Background()); err != nil {
			t.Fatal(err)
		}
		x.subs[c] = ps
	}
	return x
}

func (x *crossCheck) channel(client string) string {
	if client == "" {
		return x.rk.channel
	}
	return x.rk.channel + ":" + client
}

func (x *crossCheck) close() {
	for c, ps := range x.subs {
		_ = ps.Close()
		delete(x.subs, c)
	}
}

// world is the model's world of the key now, its data read from Redis.
func (x *crossCheck) world() *protocol.World {
	k, now := x.read()
	w := protocol.NewWorld(now, x.claim, x.lease)
	w.Key, w.Dead, w.Frozen = k, x.dead, x.stop
	return w
}

// apply runs op on Redis and in the model and reports how they differ.
func (x *crossCheck) apply(op protocol.Op) error {
	ctx := context.Background()
	switch op.Kind {
	case protocol.OpLapse:
		before, _ := x.read()
		if err := lapseScript.Run(ctx, x.rdb, x.rk.keys()[:3], op.D).Err(); err != nil {
			return err
		}
		x.shift += op.D
		after, now := x.read()
		return protocol.DiffKeys(before, after, now, protocol.Tolerance{Ms: slack})
	case protocol.OpFreeze: // nothing in Redis: its subscription stays
		x.stop[protocol.ClientOf(op.Owner)] = true
		return nil
	case protocol.OpDie:
		c := protocol.ClientOf(op.Owner)
		x.dead[c] = true
		if ps := x.subs[c]; ps != nil {
			if err := ps.Unsubscribe(ctx, x.channel(c)); err != nil {
				return err
			}
			x.drain(ps) // Redis has taken the unsubscription
			_ = ps.Close()
			delete(x.subs, c)
		}
		return nil
	}
	start, t0, us0 := x.snapshot()
	reply, err := x.call(op)
	if err != nil {
		return fmt.Errorf("%v: %w", op, err)
	}
	after, t1, us1 := x.snapshot()
	if err := after.Consistent(); err != nil {
		return fmt.Errorf("%v: Redis's data: %w", op, err)
	}
	got := x.received()
	tl := protocol.Tolerance{Ms: t1 - t0 + slack, Clock: us0, ClockFrom: us0, ClockTo: us1}
	var diffs []error
	for _, now := range []int64{t0, t1} { // the script's time is in between
		w := protocol.NewWorld(now+x.shift, x.claim, x.lease)
		w.Key, w.Dead, w.Micros = start, x.dead, us0
		step := w.Step(op)
		diff := x.diff(step, reply, got, after, t1, tl)
		if diff == nil {
			return nil
		}
		diffs = append(diffs, fmt.Errorf("at %+d ms: %w", now-t0, diff))
	}
	return fmt.Errorf("%v from %+v: %w", op, start, errors.Join(diffs...))
}

// diff compares the model's step with what Redis did: reply, the messages
// each subscribed channel got, and the data read at now.
func (x *crossCheck) diff(step protocol.Step, reply []any, got map[string][]protocol.Message, after protocol.Key, now int64, tl protocol.Tolerance) error {
	r := make(protocol.Reply, len(reply))
	for i, v := range reply {
		switch v := v.(type) {
		case string:
			r[i] = protocol.Value{Str: v, IsStr: true}
		case int64:
			r[i] = protocol.Value{Int: v}
			if i < len(step.Reply) && step.Reply[i].Kind == protocol.Time && v != 0 {
				r[i].Int += x.shift
			}
		}
	}
	if err := protocol.DiffReplies(step.Reply, r, tl); err != nil {
		return err
	}
	want := map[string][]protocol.Message{}
	for _, m := range step.Msgs {
		if x.subs[m.Client] != nil {
			want[m.Client] = append(want[m.Client], m)
		}
	}
	for c := range x.subs {
		if err := protocol.DiffMessages(want[c], got[c], tl); err != nil {
			return fmt.Errorf("channel of %q: %w", c, err)
		}
	}
	return protocol.DiffKeys(step.Next, after, now+x.shift, tl)
}

// call runs op's script as the lock package does, with the package's
// arguments for the model's settings.
func (x *crossCheck) call(op protocol.Op) ([]any, error) {
	ctx := context.Background()
	lease, linger := x.lease, min(x.lease, 1000)
	var cmd *redis.Cmd
	switch op.Kind {
	case protocol.OpAcquire:
		cmd = scripts.Acquire.Do(ctx, x.rdb, x.rk.scriptArgs(op.Owner, lease, op.N, x.claim, int(op.Mode), "PUBLISH"))
	case protocol.OpRelease:
		cmd = scripts.Release.Do(ctx, x.rdb, x.rk.scriptArgs(op.Owner, op.N, x.claim, "PUBLISH", linger))
	case protocol.OpLeave:
		cmd = scripts.Leave.Do(ctx, x.rdb, x.rk.scriptArgs(op.Owner, x.claim, "PUBLISH", linger))
	case protocol.OpForce:
		cmd = scripts.Force.Do(ctx, x.rdb, x.rk.scriptArgs(op.Owner, x.claim, "PUBLISH", forceLinger, op.Expect))
	case protocol.OpRenew:
		cmd = scripts.Renew.Do(ctx, x.rdb, []any{"", "", 1, x.rk.lock, op.Owner, lease})
	case protocol.OpShare:
		c, wait := op.Share, 0
		if c.Wait {
			wait = 1
		}
		cmd = scripts.Share.Do(ctx, x.rdb, x.rk.scriptArgs(op.Owner, c.Op, c.Hold, c.Limit, lease, c.N, x.claim, wait, "PUBLISH", linger))
	default:
		return nil, fmt.Errorf("no script for %v", op)
	}
	v, err := cmd.Result()
	if err != nil {
		return nil, err
	}
	if n, ok := v.(int64); ok {
		return []any{n}, nil
	}
	return v.([]any), nil
}

// received returns the messages each subscribed channel got since the
// last call: a PING on each subscription comes back after them.
func (x *crossCheck) received() map[string][]protocol.Message {
	got := map[string][]protocol.Message{}
	for c, ps := range x.subs {
		for _, m := range x.drain(ps) {
			pm, ok := protocol.ParseMessage(c, m)
			if !ok {
				x.t.Fatalf("channel of %q: message %q", c, m)
			}
			if pm.Kind == protocol.HandOff {
				pm.At += x.shift
			}
			got[c] = append(got[c], pm)
		}
	}
	return got
}

// drain returns the payloads ps received until the answer to a PING.
func (x *crossCheck) drain(ps *redis.PubSub) []string {
	ctx := context.Background()
	if err := ps.Ping(ctx, "sync"); err != nil {
		x.t.Fatal(err)
	}
	var out []string
	for {
		v, err := ps.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			x.t.Fatal(err)
		}
		switch v := v.(type) {
		case *redis.Message:
			out = append(out, v.Payload)
		case *redis.Pong:
			return out
		}
	}
}

// read returns the key's data with the moments of the model's time, and
// that time.
func (x *crossCheck) read() (protocol.Key, int64) {
	k, now, _ := x.snapshot()
	return k, now + x.shift
}

// snapshot reads the key's data at once, with Redis's time in ms and µs;
// the data's moments are the model's (Redis's plus the shift).
func (x *crossCheck) snapshot() (protocol.Key, int64, int64) {
	v, err := snapshotScript.Run(context.Background(), x.rdb, x.rk.keys()[:3]).Slice()
	if err != nil {
		x.t.Fatal(err)
	}
	sec, _ := strconv.ParseInt(v[0].(string), 10, 64)
	usec, _ := strconv.ParseInt(v[1].(string), 10, 64)
	now := sec*1000 + usec/1000
	exp := func(pttl any) int64 {
		if d := pttl.(int64); d >= 0 {
			return now + d + x.shift
		}
		return protocol.NoTTL
	}
	var k protocol.Key
	if kv := v[3].([]any); len(kv) > 0 {
		k.Hash, k.HashExp = map[string]string{}, exp(v[2])
		for i := 0; i < len(kv); i += 2 {
			f, val := kv[i].(string), kv[i+1].(string)
			if (f == "open" && val != "0") || f == "open_until" {
				n, _ := strconv.ParseInt(val, 10, 64)
				val = strconv.FormatInt(n+x.shift, 10)
			}
			if i := strings.LastIndexByte(val, ' '); f[0] == '=' && i > 0 { // a shared holder: its lease end is a moment
				n, _ := strconv.ParseInt(val[i+1:], 10, 64)
				val = val[:i+1] + strconv.FormatInt(n+x.shift, 10)
			}
			k.Hash[f] = val
		}
	}
	if q := v[5].([]any); len(q) > 0 {
		k.QueueExp = exp(v[4])
		for _, o := range q {
			k.Queue = append(k.Queue, o.(string))
		}
	}
	if kv := v[7].([]any); len(kv) > 0 {
		k.Waits, k.WaitsExp = map[string]int64{}, exp(v[6])
		for i := 0; i < len(kv); i += 2 {
			f := kv[i].(string)
			n, _ := strconv.ParseInt(kv[i+1].(string), 10, 64)
			if f[0] != '~' { // a reader's mark holds no moment
				n += x.shift
			}
			k.Waits[f] = n
		}
	}
	return k, now, sec*1000000 + usec
}

// snapshotScript reads the lock hash, queue and waits with their PTTLs
// and Redis's time, in one step.
var snapshotScript = redis.NewScript(`
local t = redis.call('TIME')
return {t[1], t[2],
  redis.call('PTTL', KEYS[1]), redis.call('HGETALL', KEYS[1]),
  redis.call('PTTL', KEYS[2]), redis.call('LRANGE', KEYS[2], 0, -1),
  redis.call('PTTL', KEYS[3]), redis.call('HGETALL', KEYS[3])}`)

// lapseScript makes ARGV[1] ms pass for the lock hash, queue and waits:
// their TTLs shorten by it (a key whose TTL runs out goes) and the
// moments they store move back by it, as if Redis's clock moved on.
var lapseScript = redis.NewScript(`
local d = tonumber(ARGV[1])
local open = redis.call('HMGET', KEYS[1], 'open', 'open_until')
if open[1] and open[1] ~= '0' then
  redis.call('HSET', KEYS[1], 'open', tonumber(open[1]) - d)
end
if open[2] then
  redis.call('HSET', KEYS[1], 'open_until', tonumber(open[2]) - d)
end
local w = redis.call('HGETALL', KEYS[3])
for i = 1, #w, 2 do
  if string.byte(w[i], 1) ~= 126 then -- '~': a reader's mark
    redis.call('HSET', KEYS[3], w[i], tonumber(w[i + 1]) - d)
  end
end
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h, 2 do
  if string.byte(h[i], 1) == 61 then -- '=': a shared holder's lease end
    local head, u = string.match(h[i + 1], '^(.* )(%d+)$')
    redis.call('HSET', KEYS[1], h[i], head .. (tonumber(u) - d))
  end
end
for i = 1, 3 do
  local ttl = redis.call('PTTL', KEYS[i])
  if ttl >= 0 and ttl <= d then
    redis.call('DEL', KEYS[i])
  elseif ttl > d then
    redis.call('PEXPIRE', KEYS[i], ttl - d)
  end
end
return 1`)
