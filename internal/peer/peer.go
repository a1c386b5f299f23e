// Package peer tells what a failed exchange with an HTTP peer (a node, a receiver) means:
// whether a transport failure can mend by itself, and what an error reply says, in one line.
package peer

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"html"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"unicode/utf8"
)

// Failure is the kind of a transport failure.
type Failure int

// The kinds of transport failure. All but Transient are final when the peer has never
// answered: nothing changes them but a person fixing the address, starting the peer or
// giving it other TLS settings.
const (
	Transient   Failure = iota // may mend by itself: a reset, a closed connection, a timeout
	NoListener                 // nothing listens at the address: the connection was refused
	NoSuchHost                 // the host name does not resolve
	PlainHTTP                  // https:// was asked for, and the server answers plain HTTP
	NotTLS                     // https:// was asked for, and the server does not speak TLS
	TLSFailure                 // the TLS handshake failed (the server refused it)
	Certificate                // the server's certificate could not be verified
)

// Classify tells what a transport failure (an error from an HTTP round trip) is.
func Classify(err error) Failure {
	if err == nil {
		return Transient
	}
	var (
		dnsErr   *net.DNSError
		opErr    *net.OpError
		recErr   tls.RecordHeaderError
		certErr  *tls.CertificateVerificationError
		authErr  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalErr x509.CertificateInvalidError
	)
	switch {
	case refused(err):
		return NoListener
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return NoSuchHost
	case errors.Is(err, http.ErrSchemeMismatch):
		return PlainHTTP
	case errors.As(err, &recErr):
		return NotTLS
	case errors.As(err, &certErr), errors.As(err, &authErr), errors.As(err, &hostErr), errors.As(err, &invalErr):
		return Certificate
	case errors.As(err, &opErr) && opErr.Op == "remote error": // a TLS alert from the server
		return TLSFailure
	}
	return Transient
}

// refused reports a refused connection: ECONNREFUSED, or its Windows form.
func refused(err error) bool {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return true
	}
	var errno syscall.Errno
	return errors.As(err, &errno) && errno == wsaeconnrefused
}

// wsaeconnrefused is WSAECONNREFUSED, which Windows reports for a refused connection and
// which syscall.ECONNREFUSED does not match there.
const wsaeconnrefused = syscall.Errno(10061)

// WantsTLS reports whether an error reply says that plain HTTP was sent to a port that
// takes HTTPS (Go's and nginx's words for it).
func WantsTLS(status int, body []byte) bool {
	return status == http.StatusBadRequest &&
		(bytes.Contains(body, []byte("HTTP request to an HTTPS server")) || bytes.Contains(body, []byte("plain HTTP request was sent to HTTPS port")))
}

// Form is what a reply's body is.
type Form int

// The forms of a body.
const (
	EmptyBody Form = iota
	JSONBody
	HTMLBody
	TextBody
)

// FormOf tells what a body is.
func FormOf(b []byte) Form {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		return EmptyBody
	case json.Valid(b):
		return JSONBody
	case looksHTML(b):
		return HTMLBody
	}
	return TextBody
}

func looksHTML(b []byte) bool {
	head := bytes.ToLower(b[:min(len(b), 512)])
	return bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.Contains(head, []byte("<html")) ||
		bytes.HasPrefix(head, []byte("<")) && bytes.Contains(head, []byte("</"))
}

// Text returns what an error reply says, in one line of at most max bytes (max <= 0: no
// limit): the message of a JSON error ({"error":"…"}, {"message":"…"}, {"error":{"message":
// "…"}}, a JSON-RPC error's data or message), the text of an HTML page without its markup
// and head, or the text itself, with runs of white space made one space. An empty body
// gives "".
func Text(b []byte, max int) string {
	b = bytes.TrimSpace(b)
	var s string
	switch FormOf(b) {
	case EmptyBody:
		return ""
	case JSONBody:
		s = jsonMessage(b)
	case HTMLBody:
		s = htmlText(b)
	default:
		s = string(b)
	}
	s = strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = strings.TrimRight(s[:cut], " ") + "…"
	}
	return s
}

// jsonMessage is the message of a JSON error reply, or the JSON itself.
func jsonMessage(b []byte) string {
	var m struct {
		Error   any `json:"error"`
		Message any `json:"message"`
	}
	if b[0] == '{' && json.Unmarshal(b, &m) == nil {
		for _, v := range []any{m.Error, m.Message} {
			switch v := v.(type) {
			case string:
				if v != "" {
					return v
				}
			case map[string]any: // {"error":{"message":"…"}}, or a JSON-RPC error with data
				for _, k := range []string{"data", "message"} {
					if s, ok := v[k].(string); ok && s != "" {
						return s
					}
				}
			}
		}
	}
	return string(b)
}

var (
	htmlDrop = regexp.MustCompile(`(?is)<(head|script|style)\b.*?</(head|script|style)\s*>|<!--.*?-->`)
	htmlTag  = regexp.MustCompile(`(?s)<[^>]*>`)
	htmlName = regexp.MustCompile(`(?is)<title\b[^>]*>(.*?)</title\s*>`)
)

// htmlText is the visible text of an HTML page, after its title when the body does not
// begin with it.
func htmlText(b []byte) string {
	title := ""
	if m := htmlName.FindSubmatch(b); m != nil {
		title = strings.TrimSpace(html.UnescapeString(string(htmlTag.ReplaceAll(m[1], []byte(" ")))))
	}
	body := htmlDrop.ReplaceAll(b, nil)
	text := strings.Join(strings.Fields(html.UnescapeString(string(htmlTag.ReplaceAll(body, []byte(" "))))), " ")
	if title != "" && !strings.HasPrefix(text, title) {
		text = strings.TrimSpace(title + ": " + text)
	}
	return text
}
