// Package deliver sends CloudEvents over HTTP in binary, structured or batch mode, retrying by the webhook rules.
package deliver

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/evtctl/evtctl/pkg/retry"
)

// Mode is the HTTP content mode of the CloudEvents HTTP binding.
type Mode int

// The content modes.
const (
	Binary     Mode = iota // one request per event: attributes in ce- headers, data in the body
	Structured             // one request per event: the event in JSON format
	Batch                  // one request for all events: a JSON array
)

// String returns "binary", "structured" or "batch".
func (m Mode) String() string {
	switch m {
	case Binary:
		return "binary"
	case Structured:
		return "structured"
	case Batch:
		return "batch"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// ParseMode parses "binary", "structured" or "batch".
func ParseMode(s string) (Mode, error) {
	for _, m := range []Mode{Binary, Structured, Batch} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("unknown mode %q: want binary, structured or batch", s)
}

// Media types sent in structured and batch mode.
const (
	ContentTypeStructured = "application/cloudevents+json; charset=UTF-8"
	ContentTypeBatch      = "application/cloudevents-batch+json"
)

// Defaults.
const (
	DefaultInitial     = 200 * time.Millisecond
	DefaultMax         = 15 * time.Second
	DefaultMaxAttempts = 10
	DefaultTimeout     = 30 * time.Second
	// MaxRedirects bounds the 307/308 redirects followed for one attempt.
	MaxRedirects = 5
)

// Backoff shapes the retries: capped exponential delays with jitter.
// Zero or negative fields take the defaults.
type Backoff struct {
	Initial     time.Duration // delay before the first retry; default 200ms
	Max         time.Duration // cap on one delay (Retry-After may exceed it); default 15s
	MaxAttempts int           // attempts per request, the first included; default 10
}

// Options configures a Sender.
type Options struct {
	URL     string      // target, e.g. http://127.0.0.1:7480/events or a webhook
	Mode    Mode        // content mode
	Headers http.Header // extra headers (a Host entry sets the Host); a Content-Type among them is ignored
	Token   string      // bearer token for Authorization, if any
	// HeaderEncoding is how Binary mode writes ce- header values; the zero
	// value is the binding's percent-encoding.
	HeaderEncoding HeaderEncoding
	// Client sends the requests; nil means a default client. Its
	// CheckRedirect is replaced (on a copy) by one that follows at most
	// MaxRedirects 307/308 redirects and no redirect that would change the
	// method.
	Client *http.Client
	// Timeout bounds one attempt, reading the reply included; default 30s.
	Timeout time.Duration
	Backoff Backoff
	// OnRetry, if set, is called before waiting to retry: attempt is the
	// number of the attempt that failed (1 for the first), delay the wait
	// and err the failure.
	OnRetry func(attempt int, delay time.Duration, err error)
}

// Result is the outcome of delivering one event.
type Result struct {
	Cursor    string // the event's cursor when the target is an evtctl node, else ""
	Duplicate bool   // an evtctl node already had the event (same source and id)
	Status    int    // HTTP status of the successful reply
}

// StatusError reports a reply that was not a success: a 4xx the target
// refused the events with (never retried), a 3xx that was not followed, or
// the last 5xx or 429 when the attempts ran out.
type StatusError struct {
	Status int
	// Reason is the server's message: the "error" (or "message") member
	// of a JSON reply, else the reply's text, trimmed and shortened.
	Reason string
	// RetryAfter is the reply's Retry-After, or 0.
	RetryAfter time.Duration
}

// Error returns the status and the reason.
func (e *StatusError) Error() string {
	s := strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns ErrGone for a 410.
func (e *StatusError) Unwrap() error {
	if e.Status == http.StatusGone {
		return ErrGone
	}
	return nil
}

// ErrGone is wrapped by the error of a delivery the target answered with
// 410 Gone: it has retired and must not be sent to again.
var ErrGone = errors.New("the target is gone (410): stop sending to it")

var errTooManyRedirects = fmt.Errorf("stopped after %d redirects", MaxRedirects)

// Limits on reading replies.
const (
	maxReplyBytes  = 16 << 20 // a success reply (a batch's cursors)
	maxReasonBytes = 64 << 10 // an error reply
	maxReasonLen   = 512      // Reason kept from a text reply
)

// Sender delivers events to one target. It is safe for concurrent use.
type Sender struct {
	opts   Options
	url    string
	where  string // the URL for messages, without a password
	client *http.Client
}

// New checks opts and returns a Sender.
func New(opts Options) (*Sender, error) {
	u, err := url.Parse(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("target URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("target URL %q: want an absolute http or https URL", u.Redacted())
	}
	switch opts.Mode {
	case Binary, Structured, Batch:
	default:
		return nil, fmt.Errorf("unknown mode %d", opts.Mode)
	}
	switch opts.HeaderEncoding {
	case HeaderPercent, HeaderRaw:
	default:
		return nil, fmt.Errorf("unknown header encoding %d", opts.HeaderEncoding)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Backoff.Initial <= 0 {
		opts.Backoff.Initial = DefaultInitial
	}
	if opts.Backoff.Max <= 0 {
		opts.Backoff.Max = DefaultMax
	}
	if opts.Backoff.Max < opts.Backoff.Initial {
		opts.Backoff.Max = opts.Backoff.Initial
	}
	if opts.Backoff.MaxAttempts <= 0 {
		opts.Backoff.MaxAttempts = DefaultMaxAttempts
	}
	opts.Headers = opts.Headers.Clone()
	var c http.Client
	if opts.Client != nil {
		c = *opts.Client
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		c.Transport = tr
	}
	c.CheckRedirect = checkRedirect
	return &Sender{opts: opts, url: u.String(), where: u.Redacted(), client: &c}, nil
}

// checkRedirect follows 307 and 308 redirects, which keep the method and
// body, up to MaxRedirects; a 301, 302 or 303 (which would turn the POST
// into a GET and drop the events) comes back as the reply.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	if len(via) > MaxRedirects {
		return errTooManyRedirects
	}
	return nil
}

// Send delivers events: one request per event (Binary, Structured) or one
// request for all (Batch). It returns one Result per event, in order. On
// error it returns the results of the events delivered before the failure
// (none in Batch mode, which is all or nothing) and the error, which wraps a
// *StatusError when the target answered, ErrGone on a 410, or ctx.Err()
// when ctx ended. Each event must be one CloudEvent in JSON format. Sending
// no events sends no request.
func (s *Sender) Send(ctx context.Context, events [][]byte) ([]Result, error) {
	if len(events) == 0 {
		return []Result{}, nil
	}
	if s.opts.Mode == Batch {
		n := len(events) + 1
		for _, ev := range events {
			n += len(ev)
		}
		body := make([]byte, 0, n)
		body = append(body, '[')
		for i, ev := range events {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, ev...)
		}
		body = append(body, ']')
		h := http.Header{"Content-Type": {ContentTypeBatch}}
		status, reply, err := s.deliver(ctx, h, body)
		if err != nil {
			return nil, fmt.Errorf("POST %s (batch of %d): %w", s.where, len(events), err)
		}
		return batchResults(status, reply, len(events)), nil
	}
	results := make([]Result, 0, len(events))
	for i, ev := range events {
		var (
			h    http.Header
			body []byte
		)
		if s.opts.Mode == Structured {
			h, body = http.Header{"Content-Type": {ContentTypeStructured}}, ev
		} else {
			br, err := toBinary(ev, s.opts.HeaderEncoding)
			if err != nil {
				return results, fmt.Errorf("event %d: binary mode: %w", i, err)
			}
			h, body = br.header, br.body
		}
		status, reply, err := s.deliver(ctx, h, body)
		if err != nil {
			if len(events) > 1 {
				return results, fmt.Errorf("POST %s (event %d of %d): %w", s.where, i+1, len(events), err)
			}
			return results, fmt.Errorf("POST %s: %w", s.where, err)
		}
		results = append(results, singleResult(status, reply))
	}
	return results, nil
}

// nodeReply is an evtctl node's answer to POST /events.
type nodeReply struct {
	Cursor    string       `json:"cursor"`
	Duplicate bool         `json:"duplicate"`
	Results   []nodeResult `json:"results"`
}

type nodeResult struct {
	Cursor    string `json:"cursor"`
	Duplicate bool   `json:"duplicate"`
}

func parseReply(reply []byte) (nodeReply, bool) {
	var r nodeReply
	b := bytes.TrimSpace(reply)
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &r) != nil {
		return nodeReply{}, false
	}
	return r, true
}

func singleResult(status int, reply []byte) Result {
	r, _ := parseReply(reply)
	return Result{Cursor: r.Cursor, Duplicate: r.Duplicate, Status: status}
}

func batchResults(status int, reply []byte, n int) []Result {
	out := make([]Result, n)
	r, ok := parseReply(reply)
	for i := range out {
		out[i].Status = status
		if ok && len(r.Results) == n {
			out[i].Cursor, out[i].Duplicate = r.Results[i].Cursor, r.Results[i].Duplicate
		}
	}
	return out
}

// deliver POSTs body with header h until a success, a permanent failure,
// the last attempt, or the end of ctx. It returns the successful status and
// reply body.
func (s *Sender) deliver(ctx context.Context, h http.Header, body []byte) (int, []byte, error) {
	for attempt := 1; ; attempt++ {
		status, reply, err := s.attempt(ctx, h, body)
		if err == nil {
			return status, reply, nil
		}
		if ctx.Err() != nil {
			return 0, nil, fmt.Errorf("%w (last failure: %v)", context.Cause(ctx), err)
		}
		retryAfter, ok := retryable(err)
		if !ok {
			return 0, nil, err
		}
		if attempt >= s.opts.Backoff.MaxAttempts {
			return 0, nil, fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		delay := max(s.delay(attempt), retryAfter)
		if s.opts.OnRetry != nil {
			s.opts.OnRetry(attempt, delay, err)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, nil, fmt.Errorf("%w (last failure: %v)", context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// delay returns the wait after failed attempt n: Initial·2^(n-1) capped at
// Max, with "equal jitter" (between half and all of it).
func (s *Sender) delay(n int) time.Duration {
	return retry.Delay(n-1, s.opts.Backoff.Initial, s.opts.Backoff.Max)
}

// retryable reports whether err may be retried and the Retry-After to
// honour: transport errors and timeouts, 429 and 5xx are; other statuses,
// too many redirects and certificate failures are not.
func retryable(err error) (time.Duration, bool) {
	var se *StatusError
	if errors.As(err, &se) {
		if se.Status == http.StatusTooManyRequests || se.Status >= 500 && se.Status <= 599 {
			return se.RetryAfter, true
		}
		return 0, false
	}
	var (
		certErr  *tls.CertificateVerificationError
		authErr  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalErr x509.CertificateInvalidError
	)
	if errors.Is(err, errTooManyRedirects) || errors.As(err, &certErr) ||
		errors.As(err, &authErr) || errors.As(err, &hostErr) || errors.As(err, &invalErr) {
		return 0, false
	}
	return 0, true
}

// attempt sends one request and reads the reply within the per-attempt
// timeout. A non-2xx reply is returned as a *StatusError.
func (s *Sender) attempt(ctx context.Context, h http.Header, body []byte) (int, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	// A *bytes.Reader body gives the request GetBody, so 307/308 redirects
	// resend the same bytes.
	req, err := http.NewRequestWithContext(actx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for k, v := range s.opts.Headers {
		if strings.EqualFold(k, "Host") {
			if len(v) > 0 {
				req.Host = v[0]
			}
			continue
		}
		req.Header[k] = v
	}
	req.Header.Del("Content-Type") // the mode's (or the event's) alone
	for k, v := range h {
		req.Header[k] = v
	}
	if s.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.opts.Token)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "evtctl")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, s.transportErr(ctx, actx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		reply, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
		if err != nil {
			// The target had accepted the events; a retry is harmless
			// against duplicate suppression and needed otherwise.
			return 0, nil, s.transportErr(ctx, actx, fmt.Errorf("reading the %d reply: %w", resp.StatusCode, err))
		}
		return resp.StatusCode, reply, nil
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxReasonBytes))
	se := &StatusError{Status: resp.StatusCode, Reason: Reason(text)}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		se.RetryAfter = d
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		loc := resp.Header.Get("Location")
		se.Reason = fmt.Sprintf("redirect to %q not followed: only 307 and 308 keep the method and body", loc)
	}
	return 0, nil, se
}

// transportErr names a per-attempt timeout plainly.
func (s *Sender) transportErr(ctx, actx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no complete reply within %s: %w", s.opts.Timeout, context.DeadlineExceeded)
	}
	return err
}

// Reason returns the message of a receiver's error reply: the "error" (or "message")
// member of a JSON reply, else its text with whitespace collapsed, shortened to 512 bytes.
func Reason(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var m struct {
			Error   any `json:"error"`
			Message any `json:"message"`
		}
		if json.Unmarshal(b, &m) == nil {
			for _, v := range []any{m.Error, m.Message} {
				switch v := v.(type) {
				case string:
					if v != "" {
						return v
					}
				case map[string]any: // {"error":{"message":"..."}}
					if msg, ok := v["message"].(string); ok && msg != "" {
						return msg
					}
				}
			}
		}
	}
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(b), "\uFFFD")), " ")
	if len(s) > maxReasonLen {
		cut := maxReasonLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// parseRetryAfter parses a Retry-After value: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	return retry.ParseRetryAfter(v, now)
}
