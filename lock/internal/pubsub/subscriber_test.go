package pubsub

import (
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// record is a Receiver that notes what it is given.
type record struct{ got []string }

func (r *record) Message(channel, payload string) {
	r.got = append(r.got, "message "+channel+" "+payload)
}
func (r *record) Subscribed(channel string) { r.got = append(r.got, "subscribed "+channel) }
func (r *record) Recheck()                  { r.got = append(r.got, "recheck") }

// Messages and confirmed subscriptions, sharded or not, reach the
// Receiver; PONGs and unsubscriptions only show the connection alive.
func TestDeliverRoutesByKind(t *testing.T) {
	r := &record{}
	s := &Subscriber{r: r}
	for _, msg := range []any{
		&redis.Message{Channel: "c", Payload: "a b"},
		&redis.Subscription{Kind: "subscribe", Channel: "c"},
		&redis.Subscription{Kind: "ssubscribe", Channel: "d"},
		&redis.Subscription{Kind: "unsubscribe", Channel: "c"},
		&redis.Subscription{Kind: "sunsubscribe", Channel: "d"},
		&redis.Pong{},
	} {
		s.deliver(msg)
	}
	want := []string{"message c a b", "subscribed c", "subscribed d"}
	if !reflect.DeepEqual(r.got, want) {
		t.Errorf("delivered %q, want %q", r.got, want)
	}
}

// The health checks of a connection carrying channels follow the claim
// window: pinged after a window of silence, late after a quarter, rechecked
// every half, replaced after two and a quarter.
func TestTimingFollowsTheWindow(t *testing.T) {
	got := newTiming(time.Second)
	want := timing{busyCheck: time.Second, lateAfter: 250 * time.Millisecond, recheckEvery: 500 * time.Millisecond, pingTimeout: 2250 * time.Millisecond}
	if got != want {
		t.Errorf("newTiming(1s) = %+v, want %+v", got, want)
	}
}
