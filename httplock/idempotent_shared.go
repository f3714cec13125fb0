package httplock

// Stand-ins for what package internal/httpkit will share with ginlock;
// replaced by it once it is there.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// writeProblem answers with an RFC 9457 problem body.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Title  string `json:"title"`
		Status int    `json:"status"`
		Detail string `json:"detail"`
	}{"about:blank", http.StatusText(status), status, detail})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// retryAfterSecs is a Retry-After value: whole seconds rounded up, at
// least 1.
func retryAfterSecs(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// release unlocks on a goroutine of its own and waits for it 100 ms at
// most.
func release(unlock lock.UnlockFunc) {
	done := make(chan struct{})
	releasing.Add(1)
	go func() {
		defer releasing.Add(-1)
		defer close(done)
		_ = unlock()
	}()
	t := time.NewTimer(100 * time.Millisecond)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

var releasing atomic.Int64

// writeValue writes v escaped: unreserved bytes as they are, others %XX,
// and "%h" + hex SHA-256 when that is longer than 64 bytes.
func writeValue(b *strings.Builder, v string) {
	unreserved := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~'
	}
	var e strings.Builder
	for i := 0; i < len(v); i++ {
		if c := v[i]; unreserved(c) {
			e.WriteByte(c)
		} else {
			e.WriteByte('%')
			e.WriteString(strings.ToUpper(hex.EncodeToString([]byte{c})))
		}
	}
	if e.Len() > 64 {
		sum := sha256.Sum256([]byte(v))
		b.WriteString("%h" + hex.EncodeToString(sum[:]))
		return
	}
	b.WriteString(e.String())
}
