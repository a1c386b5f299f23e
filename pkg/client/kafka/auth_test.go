package kafka

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/evtctl/evtctl/pkg/client"
)

// testCert is a certificate for 127.0.0.1 and a CA file that trusts it.
func testCert(t *testing.T) (*tls.Config, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler()) // for its certificate
	cfg := &tls.Config{Certificates: srv.TLS.Certificates}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	return cfg, ca
}

// TestSASLAndTLS reads through SASL (PLAIN and SCRAM) over TLS; wrong credentials and an
// untrusted certificate are final errors that never show the password.
func TestSASLAndTLS(t *testing.T) {
	t.Parallel()
	tc, ca := testCert(t)
	k := newCluster(t, kfake.EnableSASL(), kfake.TLS(tc),
		kfake.Superuser("SCRAM-SHA-512", "admin", "adm1n-pass"),
		kfake.Superuser("PLAIN", "reader", "pl4in-pass"),
		kfake.Superuser("SCRAM-SHA-256", "reader256", "scr4m-pass"))
	admin := k.client(kgo.DialTLSConfig(&tls.Config{InsecureSkipVerify: true}), //nolint:gosec // test cluster
		kgo.SASL(scram.Auth{User: "admin", Pass: "adm1n-pass"}.AsSha512Mechanism()))
	k.cl = admin
	k.adm = kadmClient(admin)
	k.topic("secure", 1)
	k.produce(oedxRecord("secure", 0, 1))
	// kfake drops the connection on bad credentials; a Kafka broker answers
	// SASL_AUTHENTICATION_FAILED, as this does.
	k.c.ControlKey(int16(kmsg.SASLAuthenticate), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.c.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		if !bytes.Contains(r.SASLAuthBytes, []byte("wr0ng")) && !bytes.Contains(r.SASLAuthBytes, []byte("n=nobody,")) {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})

	base := "kafka://" + k.addr() + "/secure?security.protocol=SASL_SSL&ssl.ca.location=" + ca
	for _, c := range []struct {
		query   string
		wantErr string // "" reads
		secret  string
	}{
		{"&sasl.mechanism=PLAIN&sasl.username=reader&sasl.password=pl4in-pass", "", ""},
		{"&sasl.mechanism=SCRAM-SHA-256&sasl.username=reader256&sasl.password=scr4m-pass", "", ""},
		{"&sasl.mechanism=SCRAM-SHA-512&sasl.username=admin&sasl.password=adm1n-pass", "", ""},
		{"&sasl.mechanism=PLAIN&sasl.username=reader&sasl.password=wr0ng-pass", "SASL authentication failed", "wr0ng-pass"},
		{"&sasl.mechanism=SCRAM-SHA-256&sasl.username=nobody&sasl.password=s3cret-pass", "SASL authentication failed", "s3cret-pass"},
	} {
		cfg, err := ParseURL(base + c.query)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		p, err := s.Page(ctxT(t), client.PageRequest{Max: 10})
		s.Close()
		if c.wantErr == "" {
			if err != nil || len(p.Items) != 1 {
				t.Errorf("%s: %v", c.query, err)
			}
			continue
		}
		t.Logf("%s: %v", c.query, err)
		var ce *ContactError
		if !errors.As(err, &ce) || Retryable(err) || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("%s: %v (%T), want a final error saying %q", c.query, err, err, c.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), c.secret) || strings.Contains(s.Node(), c.secret) {
			t.Errorf("the password shows: %v, node %s", err, s.Node())
		}
	}

	// TLS: the certificate is trusted through ssl.ca.location, or not verified at all.
	noCA, _ := ParseURL("kafka://" + k.addr() + "/secure?security.protocol=SASL_SSL&sasl.mechanism=PLAIN&sasl.username=reader&sasl.password=pl4in-pass")
	s, _ := New(noCA)
	_, err := s.Page(ctxT(t), client.PageRequest{Max: 10})
	s.Close()
	t.Logf("untrusted: %v", err)
	var ce *ContactError
	if !errors.As(err, &ce) || Retryable(err) || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an untrusted certificate: %v (%T)", err, err)
	}
	insecure, _ := ParseURL(noCA.Node() + "?security.protocol=SASL_SSL&sasl.mechanism=PLAIN&sasl.username=reader&sasl.password=pl4in-pass&enable.ssl.certificate.verification=false")
	s, _ = New(insecure)
	p, err := s.Page(ctxT(t), client.PageRequest{Max: 10})
	s.Close()
	if err != nil || len(p.Items) != 1 {
		t.Errorf("verification off: %v", err)
	}
	// Plain text against a TLS port.
	plain, _ := ParseURL("kafka://" + k.addr() + "/secure")
	s, _ = New(plain)
	_, err = s.Page(ctxT(t), client.PageRequest{Max: 10})
	s.Close()
	t.Logf("plain: %v", err)
	if !errors.As(err, &ce) || Retryable(err) {
		t.Errorf("plain text to a TLS port: %v (%T)", err, err)
	}
}
