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
		{"orders:items:42", "orders:items"},
		{"cron:nightly-report:17", "cron:nightly-report"},
		{"cronlock:run:report", "cronlock:run:report"},
		{"billing", "billing"},
		{"Billing.Export_v", "Billing.Export_v"},
		{"orders:", "orders"},
		{"orders::42", "orders"},
		{"3f2a9c", "_OTHER"},
		{":orders", "_OTHER"},
		{"", "_OTHER"},
		{"v2:orders", "_OTHER"},
		{"orders:{42}", "orders"},
		{"orders:ünïcode", "orders"},
		{"orders:with space", "orders"},
		{"orders:" + strings.Repeat("a", 32), "orders:" + strings.Repeat("a", 32)},
		{"orders:" + strings.Repeat("a", 33), "orders"},
		{strings.Repeat("x", 1<<16), "_OTHER"},
	}
	for _, tt := range tests {
		if got := otellock.DefaultLockName(tt.key); got != tt.want {
			t.Errorf("DefaultLockName(%.40q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}
