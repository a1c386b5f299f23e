package deliver

import (
	"net/http"
	"slices"
	"time"

	"github.com/evtctl/evtctl/internal/retry"
)

// Policy says how a Client treats a receiver's replies: which failures are worth another
// attempt, how long to wait before it, how many attempts to make and how many redirects to
// follow. What a policy cannot change is the same for every receiver:
//
//   - a 2xx delivers;
//   - 410 Gone is final and means the receiver has retired: the error wraps ErrGone, and the
//     caller must not send to it again;
//   - a retried reply's Retry-After (seconds or an HTTP date) is honoured, capped at
//     retry.MaxRetryAfter: the wait is the later of it and the backoff's delay;
//   - a POST follows only 307 and 308, which keep the method and the body (a 301, 302 or 303
//     would turn it into a GET without the body, and comes back as a final failure); a GET
//     follows any redirect;
//   - a redirect to another origin (scheme, host or port) carries only the headers that
//     describe the body (Content-Type, ce-*) and the User-Agent: never Authorization,
//     Cookie, a signature or any header the user supplied;
//   - a redirect from https to http is refused, so that nothing goes out in clear text
//     that was meant to be encrypted;
//   - certificate failures, too many redirects and a refused redirect are final.
type Policy struct {
	// Retry lists the statuses worth another attempt.
	Retry []int
	// RetryTransport retries transport failures (a refused connection, a reset, no reply
	// within the timeout).
	RetryTransport bool
	// FirstContactFinal makes the transport failures that waiting does not mend final until
	// the receiver has answered a request of this Client (with any status): nothing
	// listening at the address, a host name that does not resolve, TLS that does not fit.
	// A person has to act first (start the receiver, fix the URL); once the receiver has
	// answered, they are retried as RetryTransport says, as a receiver restarting is.
	FirstContactFinal bool
	// MaxRedirects bounds the redirects followed in one attempt; 0 means
	// DefaultMaxRedirects, a negative value follows none.
	MaxRedirects int
	// Backoff paces the attempts.
	Backoff Backoff
}

// DefaultMaxRedirects is the number of redirects followed in one attempt unless a Policy
// says otherwise.
const DefaultMaxRedirects = 5

// Backoff defaults.
const (
	DefaultInitial     = 200 * time.Millisecond
	DefaultMax         = 15 * time.Second
	DefaultMaxAttempts = 10
)

// Backoff paces the attempts of one request. Zero or negative fields take the defaults.
type Backoff struct {
	// Initial is the wait after the first failure, doubling after each further one up to
	// Max, with equal jitter (between half and all of it). Defaults 200ms and 15s.
	Initial, Max time.Duration
	// Tiers, when set, replaces the doubling with fixed waits: the wait after failure n is
	// Tiers[n-1], the last one once n is past the list.
	Tiers []time.Duration
	// MaxAttempts bounds the attempts, the first included. Default 10, or one per tier plus
	// the first with Tiers.
	MaxAttempts int
}

// WebhookPolicy is the policy of the CloudEvents HTTP webhook: 500, 502, 503, 504 and 429
// are retried (429 after its Retry-After), as are transport failures; any other reply
// (a 4xx, a 501, a 3xx that is not followed) is final.
func WebhookPolicy() Policy {
	return Policy{
		Retry: []int{
			http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable,
			http.StatusGatewayTimeout, http.StatusTooManyRequests,
		},
		RetryTransport: true,
	}
}

// EventedAPIPolicy is the policy of the Evented API for signals: a generator must not
// retry any status but 500, 503 and 504. Transport failures, which are not replies, are
// retried.
func EventedAPIPolicy() Policy {
	return Policy{
		Retry:          []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusGatewayTimeout},
		RetryTransport: true,
	}
}

// Retries reports whether a reply with this status is worth another attempt.
func (p Policy) Retries(status int) bool { return slices.Contains(p.Retry, status) }

// Attempts returns how many attempts the policy allows, the first included.
func (p Policy) Attempts() int {
	switch {
	case p.Backoff.MaxAttempts > 0:
		return p.Backoff.MaxAttempts
	case len(p.Backoff.Tiers) > 0:
		return len(p.Backoff.Tiers) + 1
	}
	return DefaultMaxAttempts
}

// Wait returns how long to wait after failed attempt n (1 for the first) before the next:
// the backoff's delay, or the reply's Retry-After when that is later.
func (p Policy) Wait(n int, a Attempt) time.Duration {
	d := p.Backoff.Delay(n)
	if a.HasRetryAfter {
		d = max(d, a.RetryAfter)
	}
	return d
}

// Delay returns the backoff's wait after failed attempt n (1 for the first).
func (b Backoff) Delay(n int) time.Duration {
	n = max(n, 1)
	if len(b.Tiers) > 0 {
		return b.Tiers[min(n, len(b.Tiers))-1]
	}
	initial, maxd := b.Initial, b.Max
	if initial <= 0 {
		initial = DefaultInitial
	}
	if maxd <= 0 {
		maxd = DefaultMax
	}
	return retry.Delay(n-1, initial, max(maxd, initial))
}

func (p Policy) maxRedirects() int {
	switch {
	case p.MaxRedirects < 0:
		return 0
	case p.MaxRedirects == 0:
		return DefaultMaxRedirects
	}
	return p.MaxRedirects
}

// Verdict is what one attempt means for the request.
type Verdict int

// The verdicts.
const (
	Delivered Verdict = iota // a 2xx
	Retry                    // a failure the policy retries
	Gone                     // 410 Gone: the receiver has retired; never send to it again
	Failed                   // a final failure: another attempt cannot succeed
	Abandoned                // the context ended first; the request is still to be made
)

// verdictOf classifies a reply's status.
func (p Policy) verdictOf(status int) Verdict {
	switch {
	case status >= 200 && status <= 299:
		return Delivered
	case status == http.StatusGone:
		return Gone
	case p.Retries(status):
		return Retry
	}
	return Failed
}
