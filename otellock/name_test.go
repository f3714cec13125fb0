package otellock_test

import (
	"strings"
	"testing"

	"github.com/lockkit/lockkit/otellock"
)

func TestDefaultLockName(t *testing.T) {
	tests := []struct{ key, want string }{
		{"orders:42", "orders"},
		{"orders:42:items", "orders"},
		{"orders:items:42", "orders"},
		// Letters-only segments may be identifiers: never kept.
		{"users:alice", "users"},
		{"users:alice:cart", "users"},
		{"sku:blue-widget", "sku"},
		{"orders:deadbeef", "orders"},
		{"sessions:AbCdEfGhIjKlMnOp", "sessions"},
		{"cron:nightly-report:17", "cron"},
		{"billing", "billing"},
		{"billing.export_v", "billing.export_v"},
		{"cron-jobs:x", "cron-jobs"},
		{"cafe:1", "cafe"},
		{"feedface", "_OTHER"},
		// Identifiers made of letters only: mixed case (base62 or
		// base64 tokens) or hex-like runs. Random 10-character base62
		// tokens have no digit 17 % of the time ((52/62)^10).
		{"Billing.Export_v", "_OTHER"},
		{"xKqPzRwTbN", "_OTHER"},
		{"QWxhZGRpbmVzcw:cart", "_OTHER"},
		{"deadbeefcafe:1", "_OTHER"},
		{"aBcDeFgHiJkLmNoP", "_OTHER"},
		{"orders:", "orders"},
		{"orders::42", "orders"},
		{"3f2a9c", "_OTHER"},
		{":orders", "_OTHER"},
		{"", "_OTHER"},
		{"v2:orders", "_OTHER"},
		{"ünïcode:1", "_OTHER"},
		{"with space:1", "_OTHER"},
		{strings.Repeat("q", 32) + ":1", strings.Repeat("q", 32)},
		{strings.Repeat("q", 33) + ":1", "_OTHER"},
		{strings.Repeat("x", 1<<16), "_OTHER"},
	}
	for _, tt := range tests {
		if got := otellock.DefaultLockName(tt.key); got != tt.want {
			t.Errorf("DefaultLockName(%.40q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
