package locktest

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer safe for a writer (a logger, a command run
// in a goroutine) and a test reading it to share. The zero value is an
// empty buffer.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
