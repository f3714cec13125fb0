package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockkit/lockkit/internal/locktest"
	"github.com/lockkit/lockkit/internal/redistest"
)

// TestRediss: lockkit reaches a Redis over TLS with a rediss:// URL.
func TestRediss(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	selfSigned(t, cert, key)
	tlsPort := redistest.FreePort(t)
	srv := redistest.Start(t, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", cert, "--tls-auth-clients", "no")
	ctx := context.Background()
	_, unlock := locktest.MustLock(t, holder(t, srv.Client(t), "over-tls"), ctx, "k")
	defer unlock()
	url := "rediss://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort)) + "?skip_verify=true"
	code, out, errOut := lockkit(t, ctx, url, "", "show", "k")
	if code != exitOK || !strings.Contains(out, "over-tls") {
		t.Fatalf("show over TLS: %d\n%s%s", code, out, errOut)
	}
	// Without skipping verification the self-signed certificate is refused.
	code, _, errOut = lockkit(t, ctx, strings.TrimSuffix(url, "?skip_verify=true"), "", "show", "k")
	if code != exitFailure || !strings.Contains(errOut, "certificate") {
		t.Fatalf("unverified certificate: %d %s", code, errOut)
	}
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}
