package otellock_test

import (
	"testing"

	"github.com/lockkit/lockkit/otellock"
)

// TestDefaultLockNameDropsIdentifiers (review of issue 18, item 1: "the
// default never carries an identifier-like segment"): keys that begin
// with an identifier made of letters only (random tokens in base62 or
// base64url, hex digests that happen to have no digit, mixed-case ids)
// must not become lock names. Random 10-character base62 tokens are all
// letters 17 % of the time ((52/62)^10), so a service keyed by session
// token fills the 100 names of the cap with session ids.
func TestDefaultLockNameDropsIdentifiers(t *testing.T) {
	for _, key := range []string{
		"xKqPzRwTbN",          // a base62 session token without digits
		"QWxhZGRpbmVzcw:cart", // base64 of a name
		"deadbeefcafe:1",      // a hex id without digits
		"aBcDeFgHiJkLmNoP",    // mixed-case id
	} {
		if got := otellock.DefaultLockName(key); got != "_OTHER" {
			t.Errorf("DefaultLockName(%q) = %q, want _OTHER: the segment is an identifier", key, got)
		}
	}
	// Constant-looking names still pass.
	for key, want := range map[string]string{"orders:42": "orders", "billing": "billing", "cron-jobs:x": "cron-jobs"} {
		if got := otellock.DefaultLockName(key); got != want {
			t.Errorf("DefaultLockName(%q) = %q, want %q", key, got, want)
		}
	}
}
