package forward

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/evtctl/evtctl/pkg/deliver"
	"github.com/evtctl/evtctl/pkg/retry"
)

// MaxRedirects bounds the 307 and 308 redirects followed in one attempt.
const MaxRedirects = 5

// DefaultTimeout bounds one attempt when Target.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// Limits on reading a receiver's reply.
const (
	maxDrainBytes  = 64 << 10 // read from a success reply, so the connection can be reused
	maxReasonBytes = 64 << 10 // read from an error reply for its message
)

// Target is the receiver events are forwarded to, and how they are sent.
type Target struct {
	URL       string
	Mode      deliver.Mode  // deliver.Binary (the default) or deliver.Structured
	Header    http.Header   // extra headers; dropped on a redirect to another origin
	Secret    []byte        // Standard Webhooks signing key; nil: unsigned
	Timeout   time.Duration // one attempt, the reply included; default DefaultTimeout
	UserAgent string        // default "evtctl"
	// HeaderEncoding is how Binary mode writes ce- header values: the binding's
	// percent-encoding (the default) or raw, for receivers that do not decode them.
	HeaderEncoding deliver.HeaderEncoding
	// Client sends the requests; nil means a default one. Its CheckRedirect is replaced, on
	// a copy, by forward's redirect rules.
	Client *http.Client
}

// sender makes single delivery attempts to a Target.
type sender struct {
	t      Target
	url    string
	where  string // the URL without a password, for messages
	client *http.Client
}

var errTooManyRedirects = fmt.Errorf("more than %d redirects", MaxRedirects)

func newSender(t Target, conns int) (*sender, error) {
	u, err := url.Parse(t.URL)
	if err != nil {
		return nil, fmt.Errorf("target URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("target URL %q: want an absolute http or https URL", u.Redacted())
	}
	switch t.Mode {
	case deliver.Binary, deliver.Structured:
	default:
		return nil, fmt.Errorf("mode %s: forward sends one event per request, in binary or structured mode", t.Mode)
	}
	if t.Timeout <= 0 {
		t.Timeout = DefaultTimeout
	}
	if t.UserAgent == "" {
		t.UserAgent = "evtctl"
	}
	t.Header = t.Header.Clone()
	s := &sender{t: t, url: u.String(), where: u.Redacted()}
	var c http.Client
	if t.Client != nil {
		c = *t.Client
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = max(conns, 2)
		c.Transport = tr
	}
	c.CheckRedirect = s.checkRedirect
	s.client = &c
	return s, nil
}

// hopsKey carries, in a request's context, where checkRedirect counts the hops.
type hopsKey struct{}

// checkRedirect follows 307 and 308 redirects, which keep the method and the body, up to
// MaxRedirects. A 301, 302 or 303 (which would turn the POST into a GET without the event)
// comes back as the reply. On a redirect to another origin (scheme, host or port), the
// headers that could carry credentials are dropped: Authorization, Proxy-Authorization,
// Cookie, the extra headers of Target.Header and the webhook signature.
func (s *sender) checkRedirect(req *http.Request, via []*http.Request) error {
	if req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	if len(via) > MaxRedirects {
		return errTooManyRedirects
	}
	if n, ok := req.Context().Value(hopsKey{}).(*int); ok {
		*n = len(via)
	}
	if !sameOrigin(req.URL, via[0].URL) {
		for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie", HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature} {
			req.Header.Del(k)
		}
		for k := range s.t.Header {
			req.Header.Del(k)
		}
	}
	return nil
}

func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// attemptResult is the outcome of one attempt.
type attemptResult struct {
	Status        int           // the reply's status; 0 when there was none
	Latency       time.Duration // from sending to the end of the reply
	RetryAfter    time.Duration // the reply's Retry-After (capped), when HasRetryAfter
	HasRetryAfter bool
	Reason        string // the receiver's message, or what went wrong
	Err           error  // a transport failure or timeout; nil when the receiver answered
	Redirects     int    // redirects followed
	Invalid       bool   // the event cannot be sent in this mode: not worth retrying
	Abandoned     bool   // the attempt was cut short by the end of ctx
}

// verdict is what an attempt means for the event.
type verdict int

const (
	delivered verdict = iota // a 2xx
	retryable                // 500, 502, 503, 504, 429, or a transport failure or timeout
	gone                     // 410: the receiver is retired
	failed                   // any other reply: not retried
	abandoned                // cut short; the event is still to be delivered
)

func (r attemptResult) verdict() verdict {
	switch {
	case r.Abandoned:
		return abandoned
	case r.Invalid:
		return failed
	case r.Err != nil:
		if errors.Is(r.Err, errTooManyRedirects) || isCertError(r.Err) {
			return failed
		}
		return retryable
	case r.Status >= 200 && r.Status <= 299:
		return delivered
	case r.Status == http.StatusGone:
		return gone
	}
	switch r.Status {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
		http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return retryable
	}
	return failed
}

func isCertError(err error) bool {
	var (
		certErr  *tls.CertificateVerificationError
		authErr  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalErr x509.CertificateInvalidError
	)
	return errors.As(err, &certErr) || errors.As(err, &authErr) || errors.As(err, &hostErr) || errors.As(err, &invalErr)
}

// attempt POSTs one event once, within the per-attempt timeout.
func (s *sender) attempt(ctx context.Context, id string, event []byte) attemptResult {
	h, body, err := deliver.Encode(s.t.Mode, s.t.HeaderEncoding, event)
	if err != nil {
		return attemptResult{Invalid: true, Reason: fmt.Sprintf("cannot be sent in %s mode: %v", s.t.Mode, err)}
	}
	hops := 0
	actx, cancel := context.WithTimeout(context.WithValue(ctx, hopsKey{}, &hops), s.t.Timeout)
	defer cancel()
	// A *bytes.Reader body gives the request GetBody, so a 307 or 308 resends the same bytes.
	req, err := http.NewRequestWithContext(actx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return attemptResult{Invalid: true, Reason: err.Error()}
	}
	for k, v := range s.t.Header {
		req.Header[k] = v
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("User-Agent", s.t.UserAgent)
	if s.t.Secret != nil {
		signHeaders(req.Header, s.t.Secret, id, time.Now().Unix(), body)
	}
	start := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		r := attemptResult{Latency: time.Since(start), Redirects: hops}
		switch {
		case ctx.Err() != nil:
			r.Abandoned, r.Err, r.Reason = true, ctx.Err(), "abandoned"
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			r.Err = fmt.Errorf("no reply within %s: %w", s.t.Timeout, context.DeadlineExceeded)
			r.Reason = r.Err.Error()
		default:
			r.Err = err
			r.Reason = transportReason(err)
		}
		return r
	}
	defer resp.Body.Close()
	r := attemptResult{Status: resp.StatusCode, Redirects: hops}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		// The receiver has accepted the event; the rest of the reply is read only so the
		// connection can be reused, and a failure to read it changes nothing.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBytes))
		r.Latency = time.Since(start)
		return r
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxReasonBytes))
	r.Latency = time.Since(start)
	if r.Reason = deliver.Reason(text); r.Reason == "" {
		r.Reason = http.StatusText(resp.StatusCode)
	}
	if d, ok := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		r.RetryAfter, r.HasRetryAfter = d, true
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		r.Reason = fmt.Sprintf("redirect to %q not followed: only 307 and 308 keep the method and the body", resp.Header.Get("Location"))
	}
	return r
}

// transportReason words a transport failure without repeating the request line.
func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
