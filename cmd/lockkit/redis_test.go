package main

import (
	"context"
	"strings"
	"testing"

	"github.com/lockkit/lockkit/internal/redistest"
)

// TestBadRedisURL: an unparseable -redis URL is bad usage (exit 2), not a
// Redis failure, and the error never prints the URL's password (it ends
// up in CI logs and terminals' scroll-back).
func TestBadRedisURL(t *testing.T) {
	ctx := context.Background()
	for _, url := range []string{
		"redis://app:s3cret@127.0.0.1:6379/abc",
		"rediss://:s3cret@127.0.0.1:6379?dial_timeout=x",
		"redis://app:s3cret@127.0.0.1:6379,redis://app:s3cret@127.0.0.1:6380/x",
	} {
		code, _, errOut := lockkit(t, ctx, url, "", "show", "k")
		if code != exitUsage || strings.Contains(errOut, "s3cret") {
			t.Errorf("REDIS_URL %s: exit %d, want %d without the password:\n%s", url, code, exitUsage, errOut)
		}
	}
}

// TestBadFlagsAreUsage: flags the lock package refuses (a bad -prefix) are
// bad usage (exit 2), and so is a -quorum list naming one server twice,
// whose answer would count twice toward the majority.
func TestBadFlagsAreUsage(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	url := "redis://" + srv.Addr
	for _, args := range [][]string{
		{"-prefix", "a{", "ls"},
		{"-quorum", "-redis", url + "," + url + "," + url, "show", "k"},
	} {
		code, out, errOut := lockkit(t, ctx, url, "", args...)
		if code != exitUsage {
			t.Errorf("lockkit %q: exit %d, want %d\n%s%s", args, code, exitUsage, out, errOut)
		}
	}
}
