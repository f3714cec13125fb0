package otellock_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/lock"
	"github.com/lockkit/lockkit/otellock"
)

// TestRawKeyAttributeIsValid: lock keys are any
// bytes (lock.MaxKeyLen, no UTF-8 rule), but span attribute strings must
// be valid UTF-8: OTLP encodes them as protobuf strings, whose encoder
// refuses invalid UTF-8, so one binary key makes the export of the whole
// batch of spans fail. And a key the Client rejects as too long (bad
// input that "changes nothing") must not be copied whole (64 KiB and
// more) onto the lock.acquire span; a long key is cut to MaxKeyAttrLen
// bytes on a rune boundary, with a marker.
func TestRawKeyAttributeIsValid(t *testing.T) {
	_, rdb := newMini(t)
	tel := newTelemetry(t)
	locker := tel.locker(t, rdb, otellock.WithRawKey())
	binary := "orders:\x9f\x86\xd0\x81"
	_, unlock := locktest.MustLock(t, locker, context.Background(), binary)
	_ = unlock()
	long := strings.Repeat("é", 200) // 400 bytes
	_, unlock = locktest.MustLock(t, locker, context.Background(), long)
	_ = unlock()
	if _, _, err := locker.Lock(context.Background(), strings.Repeat("k", lock.MaxKeyLen+1)); err == nil {
		t.Fatal("Lock of an oversized key succeeded")
	}
	cut := 0
	for _, s := range tel.spans.Ended() {
		if !hasAttr(s, aKey) {
			continue
		}
		key := attr(t, s, aKey).AsString()
		if !utf8.ValidString(key) {
			t.Errorf("span %s: lock.key %q is not valid UTF-8", s.Name(), key)
		}
		if len(key) > otellock.MaxKeyAttrLen {
			t.Errorf("span %s: lock.key of %d bytes, want at most %d", s.Name(), len(key), otellock.MaxKeyAttrLen)
		}
		if strings.HasPrefix(key, "éé") && (!strings.HasSuffix(key, "é…") || len(key) < otellock.MaxKeyAttrLen-4) {
			t.Errorf("span %s: long key recorded as %q, want it cut near %d bytes ending in …", s.Name(), key, otellock.MaxKeyAttrLen)
		}
		if strings.HasPrefix(key, "éé") {
			cut++
		}
	}
	if cut == 0 {
		t.Error("no span recorded the long key")
	}
}
