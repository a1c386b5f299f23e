// Package tlsfiles builds TLS client settings from the files a user names: a CA bundle, a
// client certificate and its key.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// Files name what a TLS client trusts and presents.
type Files struct {
	CAFile   string // PEM bundle of CAs to trust beside the system's
	CertFile string // PEM client certificate (with KeyFile)
	KeyFile  string // PEM private key of CertFile
	Insecure bool   // skip verification of the server's certificate
}

// Config returns the TLS settings for f: Go's defaults with the CAs of CAFile added to the
// system's, the client certificate when one is named, and no verification when Insecure.
func (f Files) Config() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.Insecure} //nolint:gosec // the user asked for it
	if f.CAFile != "" {
		pem, err := os.ReadFile(f.CAFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", f.CAFile)
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("a client certificate needs both its certificate file and its key file")
	}
	return cfg, nil
}
