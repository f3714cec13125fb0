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
		{"Billing.Export_v", "Billing.Export_v"},
		{"orders:", "orders"},
		{"orders::42", "orders"},
		{"3f2a9c", "_OTHER"},
		{":orders", "_OTHER"},
		{"", "_OTHER"},
		{"v2:orders", "_OTHER"},
		{"ünïcode:1", "_OTHER"},
		{"with space:1", "_OTHER"},
		{strings.Repeat("a", 32) + ":1", strings.Repeat("a", 32)},
		{strings.Repeat("a", 33) + ":1", "_OTHER"},
		{strings.Repeat("x", 1<<16), "_OTHER"},
	}
	for _, tt := range tests {
		if got := otellock.DefaultLockName(tt.key); got != tt.want {
			t.Errorf("DefaultLockName(%.40q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
