package deliver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/english"
	"github.com/evtctl/evtctl/internal/peer"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/wire"
)

// DefaultTimeout bounds one attempt, reading the reply included, unless Config says
// otherwise.
const DefaultTimeout = 30 * time.Second

// Limits on reading replies.
const (
	maxReplyBytes  = 16 << 20 // a success reply that is kept (a batch's cursors)
	maxDrainBytes  = 64 << 10 // read from a success reply that is not kept, so the connection can be reused
	maxReasonBytes = 64 << 10 // an error reply
	maxReasonLen   = 512      // Reason kept from a text reply
	maxPageLen     = 100      // Reason kept from a web page
)

// Config configures a Client.
type Config struct {
	// URL is the receiver: an absolute http or https URL.
	URL string
	// Policy says what is retried, how often and how many redirects are followed; nil
	// means WebhookPolicy().
	Policy *Policy
	// Header holds extra headers, sent with every request to the receiver's origin and to
	// no other (see Policy). A Host entry sets the Host; a Content-Type is ignored: the
	// body's own is sent.
	Header http.Header
	// Token, if set, is sent as "Authorization: Bearer Token", to the receiver's origin only.
	Token string
	// UserAgent is sent unless Header has one; default "evtctl".
	UserAgent string
	// Timeout bounds one attempt, reading the reply included; default DefaultTimeout.
	Timeout time.Duration
	// HTTPClient sends the requests; nil means a client of its own. Its CheckRedirect is
	// replaced, on a copy, by the Policy's redirect rules.
	HTTPClient *http.Client
	// MaxIdleConnsPerHost sizes the idle connections kept, when HTTPClient is nil; default 16.
	MaxIdleConnsPerHost int
	// OnRetry, if set, is called by Do before it waits to retry: attempt is the number of
	// the attempt that failed (1 for the first), delay the wait and err the failure.
	OnRetry func(attempt int, delay time.Duration, err error)
}

// Client sends requests to one receiver and treats its replies by a Policy. It is the one
// HTTP sender of CloudEvents (Sender, forward) and of Evented API signals. It is safe for
// concurrent use.
type Client struct {
	cfg    Config
	policy Policy
	url    *url.URL
	where  string // the URL for messages, without a password
	hc     *http.Client
	// answered: the receiver has answered a request (with any status).
	answered atomic.Bool
}

// NewClient checks cfg and returns a Client.
func NewClient(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("target URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("target URL %q: want an absolute http or https URL", u.Redacted())
	}
	c := &Client{cfg: cfg, url: u, where: u.Redacted()}
	if cfg.Policy != nil {
		c.policy = *cfg.Policy
		c.policy.Retry = append([]int(nil), cfg.Policy.Retry...)
		c.policy.Backoff.Tiers = append([]time.Duration(nil), cfg.Policy.Backoff.Tiers...)
	} else {
		c.policy = WebhookPolicy()
	}
	if c.cfg.Timeout <= 0 {
		c.cfg.Timeout = DefaultTimeout
	}
	if c.cfg.UserAgent == "" {
		c.cfg.UserAgent = "evtctl"
	}
	c.cfg.Header = cfg.Header.Clone()
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		if cfg.MaxIdleConnsPerHost > 0 {
			tr.MaxIdleConnsPerHost = cfg.MaxIdleConnsPerHost
		}
		hc.Transport = tr
	}
	hc.CheckRedirect = c.checkRedirect
	c.hc = &hc
	return c, nil
}

// Where returns the receiver's URL without a password, for messages.
func (c *Client) Where() string { return c.where }

// Request is one request to the receiver.
type Request struct {
	// Method is POST unless set.
	Method string
	// Query, if set, is added to the URL's query string (an Evented API signal by GET).
	Query string
	// Header describes the body (Content-Type, ce- attributes): it goes with the request
	// wherever it is redirected.
	Header http.Header
	// Private holds this request's credentials (a webhook signature): sent to the
	// receiver's origin only, like Config.Header.
	Private http.Header
	// Body is sent as it is; a redirect resends the same bytes.
	Body []byte
	// KeepReply keeps a success reply's body in Attempt.Reply (up to 16 MiB); otherwise it
	// is only drained.
	KeepReply bool
}

// Attempt is the outcome of one attempt.
type Attempt struct {
	Verdict Verdict
	// Status is the reply's status; 0 when there was none.
	Status int
	// Reply is the success reply's body, with Request.KeepReply.
	Reply []byte
	// RetryAfter is the reply's Retry-After (capped), when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Reason is the receiver's message for a failure (or its status text), or what went
	// wrong when there was no reply.
	Reason string
	// Err is the failure: a *StatusError when the receiver answered, else the transport
	// failure, timeout, refused redirect or end of the context. Nil when delivered.
	Err error
	// Redirects is the number of redirects followed.
	Redirects int
	// Header is the reply's header, when there was a reply.
	Header http.Header
	// Latency runs from sending to the end of the reply.
	Latency time.Duration
}

// StatusError reports a reply that was not a success: one the policy does not retry (a
// 4xx, a 3xx that was not followed), or the last retried one when the attempts ran out.
type StatusError struct {
	Status int
	// Reason is the server's message: the "error" (or "message") member of a JSON reply,
	// else the reply's text, trimmed and shortened.
	Reason string
	// RetryAfter is the reply's Retry-After, or 0.
	RetryAfter time.Duration
	// Index is the position in a batch of the event the receiver refused, when it says
	// (an evtctl node's "index"); -1 when it does not.
	Index int
	// Header is the reply's header.
	Header http.Header
}

// Error returns the status and the reason.
func (e *StatusError) Error() string {
	s := strconv.Itoa(e.Status)
	if t := http.StatusText(e.Status); t != "" {
		s += " " + t
	}
	// A web page often repeats the status as its title: it is said once.
	if r := strings.TrimPrefix(e.Reason, s); r != "" {
		s += ": " + strings.TrimLeft(r, ": ")
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

// ErrGone is wrapped by the error of a request the receiver answered with 410 Gone: it has
// retired and must not be sent to again.
var ErrGone = errors.New("the target is gone (410): stop sending to it")

// Redirect failures, final whatever the policy.
var (
	errTooManyRedirects = errors.New("too many redirects")
	errDowngrade        = errors.New("refused a redirect from https to http: it would send in clear text")
)

// Do makes the request until it is delivered, fails for good, the policy's attempts run
// out, or ctx ends, waiting between attempts as the policy says. It returns the last
// attempt, and an error unless it was delivered: one that wraps a *StatusError when the
// receiver answered (ErrGone for a 410), or context.Cause(ctx) when ctx ended.
func (c *Client) Do(ctx context.Context, req Request) (Attempt, error) {
	var last error // the failure before this attempt
	for n := 1; ; n++ {
		a := c.Attempt(ctx, req)
		switch a.Verdict {
		case Delivered:
			return a, nil
		case Abandoned:
			if last != nil {
				return a, fmt.Errorf("%w (last failure: %v)", context.Cause(ctx), last)
			}
			return a, context.Cause(ctx)
		case Retry:
			last = a.Err
		default:
			return a, a.Err
		}
		if n >= c.policy.Attempts() {
			return a, fmt.Errorf("giving up after %s: %w", english.Plural(n, "attempt"), a.Err)
		}
		delay := c.policy.Wait(n, a)
		if c.cfg.OnRetry != nil {
			c.cfg.OnRetry(n, delay, a.Err)
		}
		if retry.Sleep(ctx, delay) != nil {
			return a, fmt.Errorf("%w (last failure: %v)", context.Cause(ctx), a.Err)
		}
	}
}

// hopsKey carries an attempt's redirect state in its request's context.
type hopsKey struct{}

// hops is what checkRedirect needs to know of an attempt, and what it tells.
type hops struct {
	keep map[string]bool // the headers that may go to another origin
	n    int             // redirects followed
}

// Attempt makes the request once, within the per-attempt timeout, and classifies the
// outcome by the policy. It does not retry.
func (c *Client) Attempt(ctx context.Context, r Request) Attempt {
	method := r.Method
	if method == "" {
		method = http.MethodPost
	}
	u := *c.url
	if r.Query != "" {
		if u.RawQuery != "" {
			u.RawQuery += "&"
		}
		u.RawQuery += r.Query
	}
	h := &hops{keep: map[string]bool{"User-Agent": true}}
	for k := range r.Header {
		h.keep[http.CanonicalHeaderKey(k)] = true
	}
	actx, cancel := context.WithTimeout(context.WithValue(ctx, hopsKey{}, h), c.cfg.Timeout)
	defer cancel()
	var body io.Reader
	if r.Body != nil {
		// A *bytes.Reader gives the request GetBody, so a 307 or 308 resends the same bytes.
		body = bytes.NewReader(r.Body)
	}
	req, err := http.NewRequestWithContext(actx, method, u.String(), body)
	if err != nil {
		return Attempt{Verdict: Failed, Reason: err.Error(), Err: err}
	}
	for k, v := range c.cfg.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Host":
			if len(v) > 0 {
				req.Host = v[0]
			}
		case "Content-Type": // the body's alone
		default:
			req.Header[k] = v
		}
	}
	for k, v := range r.Header {
		req.Header[k] = v
	}
	for k, v := range r.Private {
		req.Header[k] = v
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", c.cfg.UserAgent)
	}

	start := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		a := Attempt{Latency: time.Since(start), Redirects: h.n}
		switch {
		case ctx.Err() != nil:
			a.Verdict, a.Err, a.Reason = Abandoned, err, "abandoned"
		case errors.Is(actx.Err(), context.DeadlineExceeded):
			a.Err = fmt.Errorf("no reply within %s: %w", c.cfg.Timeout, context.DeadlineExceeded)
			a.Reason = a.Err.Error()
			a.Verdict = c.transportVerdict()
		default:
			a.Err, a.Reason = err, transportReason(err)
			a.Verdict = c.transportVerdict()
			f := peer.Classify(err)
			if errors.Is(err, errTooManyRedirects) || errors.Is(err, errDowngrade) || f == peer.Certificate ||
				c.policy.FirstContactFinal && !c.answered.Load() && f != peer.Transient {
				a.Verdict = Failed
			}
		}
		return a
	}
	defer resp.Body.Close()
	c.answered.Store(true)
	a := Attempt{Status: resp.StatusCode, Redirects: h.n, Header: resp.Header}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		if !r.KeepReply {
			// The receiver has accepted the request; the rest of the reply is read only so the
			// connection can be reused, and a failure to read it changes nothing.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrainBytes))
			a.Latency, a.Verdict = time.Since(start), Delivered
			return a
		}
		reply, err := readReply(resp, maxReplyBytes)
		a.Latency = time.Since(start)
		if err != nil {
			// The receiver had accepted the request, but what it said about it is lost; a
			// retry is harmless against duplicate suppression and needed otherwise.
			a.Status, a.Verdict = 0, c.transportVerdict()
			a.Err = fmt.Errorf("reading the %d reply: %w", resp.StatusCode, err)
			switch {
			case ctx.Err() != nil:
				a.Verdict = Abandoned
			case errors.Is(actx.Err(), context.DeadlineExceeded):
				a.Err = fmt.Errorf("no complete reply within %s: %w", c.cfg.Timeout, context.DeadlineExceeded)
			}
			a.Reason = a.Err.Error()
			return a
		}
		a.Reply, a.Verdict = reply, Delivered
		return a
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxReasonBytes))
	a.Latency = time.Since(start)
	se := &StatusError{Status: resp.StatusCode, Reason: Reason(text), Index: replyIndex(text), Header: resp.Header}
	if d, ok := retry.ParseRetryAfter(resp.Header.Get(wire.HeaderRetryAfter), time.Now()); ok {
		se.RetryAfter = d
		a.RetryAfter, a.HasRetryAfter = d, true
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		se.Reason = fmt.Sprintf("redirect to %q not followed: only 307 and 308 keep the method and the body", resp.Header.Get("Location"))
	}
	a.Reason = se.Reason
	if a.Reason == "" {
		a.Reason = http.StatusText(resp.StatusCode)
	}
	a.Err = se
	a.Verdict = c.policy.verdictOf(resp.StatusCode)
	return a
}

// readReply reads a reply's body, at most max bytes of it: in one piece when its length is
// known (a batch's cursors run to hundreds of kilobytes).
func readReply(resp *http.Response, max int64) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n <= max {
		b := make([]byte, n)
		_, err := io.ReadFull(resp.Body, b)
		return b, err
	}
	return io.ReadAll(io.LimitReader(resp.Body, max))
}

func (c *Client) transportVerdict() Verdict {
	if c.policy.RetryTransport {
		return Retry
	}
	return Failed
}

// checkRedirect applies the policy's redirect rules to the next hop of an attempt.
func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if req.Method != via[0].Method {
		return http.ErrUseLastResponse // a 301, 302 or 303 to a POST: the reply is the 3xx
	}
	if len(via) > c.policy.maxRedirects() {
		return fmt.Errorf("stopped after %d redirects: %w", len(via)-1, errTooManyRedirects)
	}
	if req.URL.Scheme == "http" {
		for _, r := range via {
			if r.URL.Scheme == "https" {
				return errDowngrade
			}
		}
	}
	h, _ := req.Context().Value(hopsKey{}).(*hops)
	if h != nil {
		h.n = len(via)
	}
	if !sameOrigin(req.URL, c.url) {
		for k := range req.Header {
			if h == nil || !h.keep[http.CanonicalHeaderKey(k)] {
				delete(req.Header, k)
			}
		}
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// transportReason words a transport failure without repeating the request line.
func transportReason(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}

// replyIndex returns the "index" member of a JSON error reply, a whole number at least 0,
// or -1.
func replyIndex(b []byte) int {
	r := gjson.GetBytes(b, "index")
	if r.Type != gjson.Number || r.Num < 0 || r.Num != float64(int(r.Num)) || r.Num > 1<<31 {
		return -1
	}
	return int(r.Num)
}

// Reason returns the message of a receiver's error reply, in one line: the "error" (or
// "message") member of a JSON reply or the text itself, up to 512 bytes; the start of a web
// page's text without its markup, up to 100 bytes, enough to tell what answered; runs of
// white space made one space.
func Reason(b []byte) string {
	if peer.FormOf(b) == peer.HTMLBody {
		return peer.Text(b, maxPageLen)
	}
	return peer.Text(b, maxReasonLen)
}
