package ginlock

import (
	"bufio"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
)

// answerWriter is c.Writer while the chain runs under [Idempotent]: a
// gin.ResponseWriter over the shared middleware's writer w, which holds
// the answer back. Like gin's own, it sends the status with the first
// body byte, or when the chain returns.
type answerWriter struct {
	w      http.ResponseWriter
	gw     gin.ResponseWriter // c's own, for CloseNotify
	status int
	size   int // -1 until the header is sent
}

var _ gin.ResponseWriter = (*answerWriter)(nil)

func (a *answerWriter) Header() http.Header { return a.w.Header() }

func (a *answerWriter) WriteHeader(code int) {
	if code > 0 && !a.Written() {
		a.status = code
	}
}

func (a *answerWriter) WriteHeaderNow() {
	if !a.Written() {
		a.size = 0
		a.w.WriteHeader(a.status)
	}
}

func (a *answerWriter) Write(p []byte) (int, error) {
	a.WriteHeaderNow()
	n, err := a.w.Write(p)
	a.size += n
	return n, err
}

func (a *answerWriter) WriteString(s string) (int, error) {
	a.WriteHeaderNow()
	n, err := io.WriteString(a.w, s)
	a.size += n
	return n, err
}

func (a *answerWriter) Status() int   { return a.status }
func (a *answerWriter) Size() int     { return a.size }
func (a *answerWriter) Written() bool { return a.size != -1 }

// Flush sends the answer so far: it is then not stored.
func (a *answerWriter) Flush() {
	a.WriteHeaderNow()
	_ = http.NewResponseController(a.w).Flush()
}

// Hijack hands over the connection: the answer is then not stored.
func (a *answerWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if a.size < 0 {
		a.size = 0
	}
	return http.NewResponseController(a.w).Hijack()
}

func (a *answerWriter) CloseNotify() <-chan bool { return a.gw.CloseNotify() }

func (a *answerWriter) Pusher() http.Pusher { return nil }

// Unwrap gives [http.ResponseController] the shared middleware's writer.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.w }
