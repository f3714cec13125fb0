package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

func TestRun(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	var out bytes.Buffer
	if err := run(context.Background(), "", &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"lock.acquire"`, `"lock.hold"`, `"charge card"`, `"busy"`,
		`"lock.acquire.duration"`, `"lock.hold.duration"`, `"lock.held"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %s", want)
		}
	}
}

// TestRunOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans and metrics are
// also posted there.
func TestRunOTLP(t *testing.T) {
	var mu sync.Mutex
	paths := map[string]int{}
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths[r.URL.Path]++
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	var out bytes.Buffer
	if err := run(context.Background(), "", &out); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if paths["/v1/traces"] == 0 || paths["/v1/metrics"] == 0 {
		t.Errorf("the collector got %v, want /v1/traces and /v1/metrics", paths)
	}
}
