package ginlock

import (
	"strings"

	"github.com/gin-gonic/gin"
)

// ginRequest is a gin request as a key template reads it (see
// httpkit.Request).
type ginRequest struct {
	c      *gin.Context
	values map[string]func(*gin.Context) string // WithValue functions by name
}

func (r ginRequest) PathValue(name string) string { return r.c.Param(name) }
func (r ginRequest) Query(name string) string     { return r.c.Query(name) }
func (r ginRequest) Header(name string) string    { return r.c.GetHeader(name) }
func (r ginRequest) Value(name string) string     { return r.values[name](r.c) }

// Route returns gin's FullPath of the request, and whether it has the
// parameter name (":name" or "*name").
func (r ginRequest) Route(name string) (string, bool) {
	path := r.c.FullPath()
	for seg := range strings.SplitSeq(path, "/") {
		if seg == ":"+name || seg == "*"+name {
			return path, true
		}
	}
	return path, false
}
