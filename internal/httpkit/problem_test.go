package httpkit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/httpkit"
	"github.com/lockkit/lockkit/lock"
)

var errMissing = errors.New("test: key value missing")

var pkg = httpkit.NewPkg("test", errMissing)

// missing returns the *MissingError of a request without path parameter id.
func missing(t *testing.T) error {
	t.Helper()
	tmpl, err := httpkit.ParseTemplate(pkg, "orders:{id}")
	if err != nil {
		t.Fatal(err)
	}
	_, err = httpkit.Key(tmpl, request{})
	if !errors.Is(err, errMissing) {
		t.Fatalf("Key without id: %v, want a match of the package's ErrMissingValue", err)
	}
	return err
}

// TestRefusalWrite checks each class of answer: status, Retry-After, and
// an RFC 9457 body.
func TestRefusalWrite(t *testing.T) {
	f := httpkit.Refusal{BusyStatus: http.StatusConflict, BusyDetail: "held", RetryAfter: 2500 * time.Millisecond}
	for _, tt := range []struct {
		name       string
		err        error
		status     int
		retryAfter string
	}{
		{"missing", missing(t), http.StatusBadRequest, ""},
		{"held", &lock.NotObtainedError{RemainingLease: 10 * time.Second}, http.StatusConflict, "3"},
		{"held, lease shorter", &lock.NotObtainedError{RemainingLease: 1900 * time.Millisecond}, http.StatusConflict, "1"},
		{"held, lease nearly over", &lock.NotObtainedError{RemainingLease: time.Millisecond}, http.StatusConflict, "1"},
		{"client went away", fmt.Errorf("%w: %w", lock.ErrNotObtained, context.Canceled), http.StatusConflict, "3"},
		{"stalled", fmt.Errorf("%w: %w", lock.ErrNotObtained, context.DeadlineExceeded), http.StatusServiceUnavailable, "3"},
		{"closed", lock.ErrClosed, http.StatusServiceUnavailable, "3"},
		{"invalid", lock.ErrInvalid, http.StatusInternalServerError, ""},
		{"misconfigured", fmt.Errorf("route: %w", httpkit.ErrMisconfigured), http.StatusInternalServerError, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			w.Header().Set("Content-Type", "text/plain")
			f.Write(w, tt.err)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
			if got := w.Header().Get("Retry-After"); got != tt.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tt.retryAfter)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			var p struct {
				Type, Title, Detail string
				Status              int
			}
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if p.Type != "about:blank" || p.Title != http.StatusText(tt.status) || p.Status != tt.status || p.Detail == "" {
				t.Errorf("problem %+v", p)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]int{
		time.Nanosecond: 1, time.Second: 1, time.Second + 1: 2, 2500 * time.Millisecond: 3,
	} {
		if got := httpkit.RetryAfter(d); got != want {
			t.Errorf("RetryAfter(%v) = %d, want %d", d, got, want)
		}
	}
}

// Reason never carries the key: the error of a failed Redis call is
// reduced to its innermost error.
func TestReason(t *testing.T) {
	redisErr := errors.New("READONLY You can't write against a read only replica")
	for err, want := range map[error]string{
		fmt.Errorf("lock %q: %w", "orders:secret", lock.ErrClosed):                   "the lock client is closed",
		fmt.Errorf("lock %q: %w", "orders:secret", lock.ErrLost):                     "the lease was lost",
		fmt.Errorf("lock %q: %w", "orders:secret", lock.ErrNotObtained):              "Redis did not answer in time",
		fmt.Errorf("lock %q: %w", "orders:secret", lock.ErrInvalid):                  "invalid lock options",
		fmt.Errorf("lock %q: %w", "orders:secret", fmt.Errorf("eval: %w", redisErr)): "Redis failed: " + redisErr.Error(),
	} {
		if got := httpkit.Reason(err); got != want {
			t.Errorf("Reason(%v) = %q, want %q", err, got, want)
		}
	}
}
