package httpkit

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/lockkit/lockkit/lock"
)

// problem is an RFC 9457 problem details object. With type "about:blank"
// the title is the status's reason phrase.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// WriteProblem answers with status and an RFC 9457 problem body (Content-Type
// application/problem+json) of type "about:blank", whose title is the
// status's reason phrase and whose detail is detail. Headers set on w
// before, such as Retry-After, go with it.
func WriteProblem(w http.ResponseWriter, status int, detail string) {
	body, _ := json.Marshal(problem{ // cannot fail: strings and an int
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
	})
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// RetryAfter is the Retry-After value of the hint d: whole seconds
// rounded up, at least 1.
func RetryAfter(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	return max(secs, 1)
}

// BusyRetryAfter is the Retry-After value of a request turned away
// because the key is held, with the hint d: [RetryAfter] of d, but never
// past the holder's remaining lease when err (a [*lock.NotObtainedError])
// tells it, in whole seconds rounded down, at least 1.
func BusyRetryAfter(d time.Duration, err error) int {
	secs := RetryAfter(d)
	var held *lock.NotObtainedError
	if errors.As(err, &held) && held.RemainingLease > 0 {
		secs = min(secs, max(int(held.RemainingLease/time.Second), 1))
	}
	return secs
}

// Refusal is how a middleware answers the requests it turns away.
type Refusal struct {
	BusyStatus int           // the status when the key is held: 409, 429
	BusyDetail string        // the detail then, before "; retry in N s"
	RetryAfter time.Duration // the Retry-After hint of a busy key and of a 503
}

// Write answers the request turned away with err with a problem body
// ([WriteProblem]):
//   - 400 Bad Request for a [*MissingError];
//   - BusyStatus with Retry-After ([BusyRetryAfter]) when err is [Busy];
//   - 500 Internal Server Error for invalid lock options ([lock.ErrInvalid])
//     or a template that does not fit the route ([ErrMisconfigured]);
//   - else, Redis stalled or unreachable or the Client closed, 503 Service
//     Unavailable with Retry-After ([RetryAfter]).
func (f Refusal) Write(w http.ResponseWriter, err error) {
	var missing *MissingError
	switch {
	case errors.As(err, &missing):
		WriteProblem(w, http.StatusBadRequest, missing.What+" is missing or empty")
	case Busy(err):
		secs := strconv.Itoa(BusyRetryAfter(f.RetryAfter, err))
		w.Header().Set("Retry-After", secs)
		WriteProblem(w, f.BusyStatus, f.BusyDetail+"; retry in "+secs+" s")
	case errors.Is(err, lock.ErrInvalid), errors.Is(err, ErrMisconfigured):
		WriteProblem(w, http.StatusInternalServerError, "the lock for this resource is misconfigured")
	default:
		w.Header().Set("Retry-After", strconv.Itoa(RetryAfter(f.RetryAfter)))
		WriteProblem(w, http.StatusServiceUnavailable, "the lock service is unavailable")
	}
}
