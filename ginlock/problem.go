package ginlock

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

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

// answer is the default failure handler: a problem body whose status
// tells why the request was turned away (see New).
func (m *middleware) answer(c *gin.Context, err error) {
	var missing *missingError
	switch {
	case errors.As(err, &missing):
		writeProblem(c, http.StatusBadRequest, missing.what+" is missing or empty")
	case m.busy(err):
		secs := retryAfter(m.cfg.retryAfter)
		var held *lock.NotObtainedError
		if errors.As(err, &held) && held.RemainingLease > 0 {
			// Never past the lease: whole seconds rounded down, at least 1.
			secs = min(secs, max(int(held.RemainingLease/time.Second), 1))
		}
		c.Header("Retry-After", strconv.Itoa(secs))
		writeProblem(c, m.cfg.conflictStatus,
			m.full+"; retry in "+strconv.Itoa(secs)+" s")
	case errors.Is(err, lock.ErrInvalid), errors.Is(err, errMisconfigured):
		writeProblem(c, http.StatusInternalServerError, "the lock for this resource is misconfigured")
	default:
		c.Header("Retry-After", strconv.Itoa(retryAfter(m.cfg.retryAfter)))
		writeProblem(c, http.StatusServiceUnavailable, "the lock service is unavailable")
	}
}

// retryAfter is a Retry-After value: whole seconds rounded up, at least 1.
func retryAfter(d time.Duration) int {
	secs := int((d + time.Second - 1) / time.Second)
	return max(secs, 1)
}

func writeProblem(c *gin.Context, status int, detail string) {
	body, _ := json.Marshal(problem{ // cannot fail: strings and an int
		Type:   "about:blank",
		Title:  http.StatusText(status),
		Status: status,
		Detail: detail,
	})
	c.Data(status, "application/problem+json", body)
}
