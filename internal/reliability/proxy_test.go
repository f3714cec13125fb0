package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// newProxy starts a toxiproxy proxy to upstream on a free loopback port,
// stopped when the test ends. Its address is its Listen field.
func newProxy(t *testing.T, name, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("proxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return p
}

// A toxic is a fault toxiproxy applies to one direction of a proxy's
// connections: "upstream" (client to Redis) or "downstream".
type toxic struct {
	Name       string           `json:"name"`
	Type       string           `json:"type"` // latency, timeout, reset_peer, ...
	Stream     string           `json:"stream"`
	Toxicity   float32          `json:"toxicity"`
	Attributes map[string]int64 `json:"attributes"`
}

// addToxic applies x to every connection of p, present and future.
func addToxic(p *toxiproxy.Proxy, x toxic) error {
	x.Toxicity = 1
	b, err := json.Marshal(x)
	if err != nil {
		return err
	}
	_, err = p.Toxics.AddToxicJson(bytes.NewReader(b))
	return err
}

func removeToxic(p *toxiproxy.Proxy, name string) error {
	return p.Toxics.RemoveToxic(context.Background(), name)
}
