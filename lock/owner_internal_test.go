package lock

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestOwnerFitsCompactHash: owners stay within 63 bytes whatever the host
// name and label, up to a sequence of six base-36 digits, so that they and
// the fields made of a mark and an owner ('>'+owner in the waits hash,
// '!'+owner of a force-unlock) fit the 64 bytes of a compact hash.
func TestOwnerFitsCompactHash(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("h", 200)
	for _, tc := range []struct{ host, label string }{
		{"web-1", ""},
		{long, ""},
		{long, strings.Repeat("l", MaxOwnerLabel)},
		{"payments-worker-5d8f7c9b4-x2x7q", "payments-7f9c"},
	} {
		owner := clientID([16]byte{1}, tc.host, tc.label) + ":" + strconv.FormatUint(36*36*36*36*36*36-1, 36)
		for _, field := range []string{owner, ">" + owner, "!" + owner} {
			if len(field) > maxOwner {
				t.Errorf("host %.10q label %q: %q is %d bytes, more than the %d of a compact hash", tc.host, tc.label, field, len(field), maxOwner)
			}
		}
		o := ParseOwner(owner)
		if o.Label != tc.label || o.PID != os.Getpid() || o.Host == "" || !strings.HasPrefix(tc.host, o.Host) {
			t.Errorf("owner %q reads as %+v", owner, o)
		}
	}
	if o := ParseOwner(clientID([16]byte{}, "payments-worker-5d8f7c9b4-x2x7q", "payments-7f9c") + ":1"); o.Host != "payments-worker-5d8f7c9b4-x2x7q"[:len(o.Host)] || len(o.Host) < 10 {
		t.Errorf("a pod name is cut to %q", o.Host)
	}
}
