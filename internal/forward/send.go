package forward

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/evtctl/evtctl/internal/deliver"
)

// DefaultTimeout bounds one attempt when Target.Timeout is not set.
const DefaultTimeout = 10 * time.Second

// Target is the receiver events are forwarded to, and how they are sent.
type Target struct {
	URL       string
	Mode      deliver.Mode  // deliver.Binary (the default) or deliver.Structured
	Header    http.Header   // extra headers; never sent to another origin (see deliver.Policy)
	Secret    []byte        // Standard Webhooks signing key; nil: unsigned
	Timeout   time.Duration // one attempt, the reply included; default DefaultTimeout
	UserAgent string        // default "evtctl"
	// HeaderEncoding is how Binary mode writes ce- header values: the binding's
	// percent-encoding (the default) or raw, for receivers that do not decode them.
	HeaderEncoding deliver.HeaderEncoding
	// Client sends the requests; nil means a default one. Its CheckRedirect is replaced, on
	// a copy, by the redirect rules of deliver.Policy.
	Client *http.Client
}

// sender makes single delivery attempts to a Target, through deliver's Client: forward
// keeps its own schedule of retries (the tiers) and asks for one attempt at a time.
type sender struct {
	t Target
	c *deliver.Client
}

func newSender(t Target, conns int, policy deliver.Policy) (*sender, error) {
	switch t.Mode {
	case deliver.Binary, deliver.Structured:
	default:
		return nil, fmt.Errorf("mode %s: forward sends one event per request, in binary or structured mode", t.Mode)
	}
	if t.Timeout <= 0 {
		t.Timeout = DefaultTimeout
	}
	c, err := deliver.NewClient(deliver.Config{
		URL: t.URL, Policy: &policy, Header: t.Header, UserAgent: t.UserAgent, Timeout: t.Timeout,
		HTTPClient: t.Client, MaxIdleConnsPerHost: max(conns, 2),
	})
	if err != nil {
		return nil, err
	}
	return &sender{t: t, c: c}, nil
}

// where returns the receiver's URL without a password.
func (s *sender) where() string { return s.c.Where() }

// attempt POSTs one event once, signed when there is a secret. An event that cannot be
// sent in the mode fails for good without a request.
func (s *sender) attempt(ctx context.Context, id string, event []byte) deliver.Attempt {
	h, body, err := deliver.Encode(s.t.Mode, s.t.HeaderEncoding, event)
	if err != nil {
		reason := fmt.Sprintf("cannot be sent in %s mode: %v", s.t.Mode, err)
		return deliver.Attempt{Verdict: deliver.Failed, Reason: reason, Err: fmt.Errorf("%s", reason)}
	}
	var private http.Header
	if s.t.Secret != nil {
		// The signature is the receiver's to check: it goes to the receiver's origin only.
		private = http.Header{}
		signHeaders(private, s.t.Secret, id, time.Now().Unix(), body)
	}
	return s.c.Attempt(ctx, deliver.Request{Header: h, Private: private, Body: body})
}
