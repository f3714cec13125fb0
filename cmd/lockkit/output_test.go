package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// TestTableOutputEscapesKeys: keys are any bytes, often built from user
// input; ls and show print those with a newline, a tab or an escape
// sequence quoted, so they neither forge table rows nor reach the
// operator's terminal as control sequences.
func TestTableOutputEscapesKeys(t *testing.T) {
	key := "orders:1\npayments:9\tother-7 web-2/17\t1\t30s\t99\t0\x1b[2J"
	url, _ := heldOn(t, "real", key)
	ctx := context.Background()
	code, out, errOut := lockkit(t, ctx, url, "", "ls")
	if code != exitOK {
		t.Fatalf("ls: %d %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n != 2 || strings.ContainsAny(out, "\x1b") {
		t.Errorf("ls printed the key raw: %d lines, want a header and one row:\n%s", n, out)
	}
	code, out, _ = lockkit(t, ctx, url, "", "show", key)
	if code != exitOK || strings.ContainsAny(out, "\x1b") || strings.HasPrefix(strings.SplitN(out, "\n", 3)[1], "payments:9") {
		t.Errorf("show printed the key raw:\n%s", out)
	}
}

// TestJSONKeyRoundTrips: keys are bytes; -o json writes one that is not
// printable UTF-8 quoted, as the tables do (with key_base64 beside it),
// and show reads that form back: a script can show or force the lock ls
// listed.
func TestJSONKeyRoundTrips(t *testing.T) {
	key := "bin:\xff\xfe"
	url, _ := heldOn(t, "stuck", key)
	ctx := context.Background()
	got := lsOne(t, url)
	if b, err := base64.StdEncoding.DecodeString(got.KeyBase64); err != nil || string(b) != key {
		t.Fatalf("key_base64 %q for %q", got.KeyBase64, key)
	}
	code, out, errOut := lockkit(t, ctx, url, "", "show", "-o", "json", got.Key)
	var shown jsonInfo
	if code != exitOK || json.Unmarshal([]byte(out), &shown) != nil || !shown.Held {
		t.Fatalf("ls -o json gave key %q for %q; show of it: exit %d, held %v %s", got.Key, key, code, shown.Held, errOut)
	}
}
