package locktest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

// Problem is an RFC 9457 problem body, as the HTTP middlewares write it.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// CheckProblem fails the test unless w is a problem answer with status:
// Content-Type application/problem+json, type about:blank, the status's
// reason phrase as title, and a detail. It returns the body.
func CheckProblem(t testing.TB, w *httptest.ResponseRecorder, status int) Problem {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status = %d, want %d; body %s", w.Code, status, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p Problem
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if p.Type != "about:blank" || p.Status != status || p.Title != http.StatusText(status) || p.Detail == "" {
		t.Fatalf("problem = %+v, want about:blank with status %d, its title and a detail", p, status)
	}
	return p
}
