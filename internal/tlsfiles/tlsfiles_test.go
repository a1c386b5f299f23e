package tlsfiles

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfig(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Files{CAFile: ca}.Config()
	if err != nil {
		t.Fatal(err)
	}
	// The server's certificate is trusted through the CA file.
	tr := &http.Transport{TLSClientConfig: cfg}
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		t.Fatalf("with the CA file: %v", err)
	}
	resp.Body.Close()
	tr.CloseIdleConnections()

	junk := filepath.Join(dir, "junk.pem")
	os.WriteFile(junk, []byte("not a certificate"), 0o600)
	for _, c := range []struct {
		f    Files
		want string
	}{
		{Files{CAFile: junk}, "holds no PEM certificate"},
		{Files{CAFile: filepath.Join(dir, "missing.pem")}, "CA file"},
		{Files{CertFile: ca}, "needs both"},
		{Files{CertFile: junk, KeyFile: junk}, "client certificate"},
	} {
		if _, err := c.f.Config(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.f, err, c.want)
		}
	}
	if cfg, err := (Files{Insecure: true}).Config(); err != nil || !cfg.InsecureSkipVerify {
		t.Errorf("insecure: %v", err)
	}
}
