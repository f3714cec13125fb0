package lock

import (
	"strconv"
	"strings"
	"testing"
)

// TestWaitAndForceFieldsFitCompactHash: owners are kept within 64 bytes so
// that Redis keeps lock hashes compact (hash-max-listpack-value bounds
// fields as well as values), but the waits hash's '>'+owner field and the
// lock hash's '!'+owner of a force-unlock are one byte longer: a 64-byte
// owner turns either hash into a full hash table.
func TestWaitAndForceFieldsFitCompactHash(t *testing.T) {
	owner := clientID([16]byte{1}, strings.Repeat("h", 200), "") + ":" + strconv.FormatUint(36*36*36*36*36*36-1, 36)
	if len(owner) > maxOwner {
		t.Fatalf("owner of %d bytes", len(owner))
	}
	for _, s := range []string{">" + owner, "!" + owner} {
		if len(s) > maxOwner {
			t.Errorf("%q is %d bytes, more than the %d of a compact hash", s, len(s), maxOwner)
		}
	}
}
