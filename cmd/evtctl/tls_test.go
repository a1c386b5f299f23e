package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns their paths.
func selfSigned(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "evtctl test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

// TestServeTLS runs the real binary with --tls-cert and --tls-key, sends an event over
// https, and replays it with --ca-file; a bad key pair is a usage error before binding.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	certFile, keyFile := selfSigned(t)
	_, url := startServe(t, "--memory", "--tls-cert", certFile, "--tls-key", keyFile)
	url = strings.Replace(url, "http://", "https://", 1)

	pool := x509.NewCertPool()
	pemBytes, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(pemBytes)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := hc.Post(url+"/events", "application/cloudevents+json",
		strings.NewReader(`{"specversion":"1.0","id":"tls-1","source":"/tls","type":"org.example.tls.v1"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ingest over https: %s", resp.Status)
	}

	replay := func(extra ...string) (string, error) {
		s, _, out, _ := testStreams()
		root := newRootCmd(s)
		root.SetArgs(append([]string{"replay", "--node", url, "-o", "jsonl", "--retry-for", "1s"}, extra...))
		err := root.ExecuteContext(context.Background())
		return out.String(), err
	}
	if _, err := replay(); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("replay trusted an unknown certificate: %v", err)
	}
	out, err := replay("--ca-file", certFile)
	if err != nil || !strings.Contains(out, `"id":"tls-1"`) {
		t.Fatalf("replay over https: %v\n%s", err, out)
	}

	// A bad key pair: usage error (exit 2), and no address file written.
	addr := filepath.Join(t.TempDir(), "addr")
	if code := run([]string{"serve", "--memory", "--listen", "127.0.0.1:0", "--addr-file", addr, "--tls-cert", keyFile, "--tls-key", certFile}); code != exitUsage {
		t.Fatalf("bad key pair: exit %d, want %d", code, exitUsage)
	}
	if _, err := os.Stat(addr); err == nil {
		t.Fatal("an address file was written for a node that never listened")
	}
}
