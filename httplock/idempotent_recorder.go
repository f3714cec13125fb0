package httplock

import (
	"bufio"
	"maps"
	"net"
	"net/http"
	"strconv"
)

// recorder is the handler's ResponseWriter under the Idempotency-Key
// middleware. It holds the answer back (status, the header as of
// WriteHeader, and the body up to max bytes) until the handler returns,
// so that the answer can be stored before the client sees it. A handler
// that flushes, hijacks the connection or writes more than max bytes
// makes it stream: what was held back is sent, and so is everything
// after, and the answer is not stored (streamed tells why).
type recorder struct {
	w        http.ResponseWriter
	max      int
	status   int         // 0 until the handler writes the header or a body
	header   http.Header // the header map as of WriteHeader, as net/http sends it
	body     []byte
	streamed string // why the answer went to the client as it came, or ""
}

func newRecorder(w http.ResponseWriter, max int) *recorder {
	return &recorder{w: w, max: max}
}

func (r *recorder) Header() http.Header { return r.w.Header() }

// WriteHeader records code; informational (1xx) headers other than 101
// Switching Protocols are sent at once, as they commit nothing.
func (r *recorder) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		r.w.WriteHeader(code)
		return
	}
	if r.status != 0 {
		return // the later call is ignored, as net/http does
	}
	r.status, r.header = code, r.w.Header().Clone()
	if r.streamed != "" {
		r.w.WriteHeader(code)
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.streamed != "" {
		return r.w.Write(p)
	}
	if len(r.body)+len(p) > r.max {
		if err := r.stream("the answer body is larger than " + strconv.Itoa(r.max) + " bytes"); err != nil {
			return 0, err
		}
		return r.w.Write(p)
	}
	r.body = append(r.body, p...)
	return len(p), nil
}

// stream sends what was held back and makes the recorder pass everything
// on from then on.
func (r *recorder) stream(why string) error {
	if r.streamed != "" {
		return nil
	}
	r.streamed = why
	r.finish()
	r.restoreHeader()
	r.w.WriteHeader(r.status)
	body := r.body
	r.body = nil
	_, err := r.w.Write(body)
	return err
}

// FlushError sends the answer so far to the client; the answer is then
// not stored.
func (r *recorder) FlushError() error {
	if err := r.stream("the handler flushed the answer"); err != nil {
		return err
	}
	return http.NewResponseController(r.w).Flush()
}

// Flush is FlushError for handlers asserting [http.Flusher].
func (r *recorder) Flush() { _ = r.FlushError() }

// Hijack hands the connection to the handler; the answer is then not
// stored.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(r.w).Hijack()
	if err == nil {
		r.streamed = "the handler hijacked the connection"
	}
	return c, rw, err
}

// Unwrap gives [http.ResponseController] the real writer for deadlines
// and full duplex.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }

// finish completes the answer after the handler returned: the status is
// 200 if the handler wrote nothing.
func (r *recorder) finish() {
	if r.status == 0 {
		r.status, r.header = http.StatusOK, r.w.Header().Clone()
	}
}

// restoreHeader makes the real header map what it was at WriteHeader:
// changes the handler made later are not sent, as with net/http.
func (r *recorder) restoreHeader() {
	h := r.w.Header()
	clear(h)
	maps.Copy(h, r.header)
}

// send writes the held-back answer to the client.
func (r *recorder) send() {
	if r.streamed != "" {
		return
	}
	r.restoreHeader()
	r.w.WriteHeader(r.status)
	_, _ = r.w.Write(r.body)
}
