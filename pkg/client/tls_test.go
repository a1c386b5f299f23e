package client

import (
	"context"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTLSAndToken(t *testing.T) {
	var gotAuth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		if gotAuth != "Bearer s3cret" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, `{"error":"the bearer token is not valid for this endpoint"}`, http.StatusUnauthorized)
			return
		}
		w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"items":[],"more":false,"oldest":"","newest":""}}`))
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// The test server's certificate is not trusted by default.
	c, err := New(Options{Node: srv.URL, Token: "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Events(ctx, Request{}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("untrusted certificate accepted: %v", err)
	}
	// With the CA file it is; the token is sent.
	c, err = New(Options{Node: srv.URL, Token: "s3cret", CAFile: caFile})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Events(ctx, Request{}); err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	if gotAuth != "Bearer s3cret" {
		t.Fatalf("Authorization = %q", gotAuth)
	}
	// --insecure skips verification.
	c, _ = New(Options{Node: srv.URL, Token: "s3cret", Insecure: true})
	if _, err := c.Events(ctx, Request{}); err != nil {
		t.Fatalf("insecure: %v", err)
	}
	// A wrong token is a 401 that is not retried, with the node's reason.
	c, _ = New(Options{Node: srv.URL, Token: "wrong", CAFile: caFile})
	_, err = c.Events(ctx, Request{})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 401 || Retryable(err) || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("wrong token: %v", err)
	}
	// A CA file that holds no certificate is refused up front.
	bad := filepath.Join(t.TempDir(), "bad.pem")
	os.WriteFile(bad, []byte("not a certificate"), 0o600)
	if _, err := New(Options{Node: srv.URL, CAFile: bad}); err == nil {
		t.Fatal("a CA file without certificates was accepted")
	}
}
