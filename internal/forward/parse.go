package forward

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Limits on retry tiers.
const (
	MaxTiers = 32                  // tiers in a --retry-delays list
	MaxDelay = 30 * 24 * time.Hour // one tier's maturity delay
)

// DefaultDelays are the maturity delays of the retry tiers when none are given.
var DefaultDelays = []time.Duration{10 * time.Second, time.Minute, 10 * time.Minute, time.Hour}

// ParseDelays reads a list of retry-tier delays such as "10s,1m,10m,1h": Go durations
// separated by commas, each positive, at most MaxDelay, and none shorter than the one before
// it. Spaces around an item are allowed; empty items, missing units and negative, zero or
// decreasing delays are not.
func ParseDelays(s string) ([]time.Duration, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("no delays: want a list such as 10s,1m,10m,1h")
	}
	items := strings.Split(s, ",")
	if len(items) > MaxTiers {
		return nil, fmt.Errorf("%d delays: at most %d tiers", len(items), MaxTiers)
	}
	out := make([]time.Duration, 0, len(items))
	for i, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("delay %d is empty: want a list such as 10s,1m,10m,1h", i+1)
		}
		d, err := time.ParseDuration(item)
		if err != nil {
			return nil, fmt.Errorf("delay %d %q is not a duration such as 10s, 1m or 1h", i+1, item)
		}
		switch {
		case d <= 0:
			return nil, fmt.Errorf("delay %d %q must be positive", i+1, item)
		case d > MaxDelay:
			return nil, fmt.Errorf("delay %d %q is longer than %s", i+1, item, MaxDelay)
		case len(out) > 0 && d < out[len(out)-1]:
			return nil, fmt.Errorf("delay %d %q is shorter than the one before it: each tier waits at least as long as the last", i+1, item)
		}
		out = append(out, d)
	}
	return out, nil
}

// FormatDelays writes delays as ParseDelays reads them.
func FormatDelays(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = shortDuration(d)
	}
	return strings.Join(parts, ",")
}

// shortDuration is d without the zero units time.Duration.String adds: 1m, not 1m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// reservedHeaders may not be set with a header flag: the request's framing, and what the
// event and its signature put in the request.
var reservedHeaders = map[string]bool{
	"content-type": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"host": true, "te": true, "trailer": true, "upgrade": true, "keep-alive": true,
	"proxy-connection": true, "expect": true,
}

// ParseHeader reads a header flag, "Name: value". The name must be an HTTP token and not one
// that forward sets itself (Content-Type, Host, the framing headers, ce-* attributes and the
// webhook-* signature headers); the value may not hold control characters. Space around the
// name and the value is dropped.
func ParseHeader(s string) (name, value string, err error) {
	k, v, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", fmt.Errorf("%q: want 'Name: value'", s)
	}
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if k == "" {
		return "", "", fmt.Errorf("%q: the header name is empty", s)
	}
	for i := 0; i < len(k); i++ {
		if !isTokenChar(k[i]) {
			return "", "", fmt.Errorf("%q: %q is not a valid header name", s, k)
		}
	}
	lk := strings.ToLower(k)
	switch {
	case reservedHeaders[lk]:
		return "", "", fmt.Errorf("%q: forward sets %s itself", s, k)
	case strings.HasPrefix(lk, "ce-"):
		return "", "", fmt.Errorf("%q: ce- headers carry the event's attributes", s)
	case strings.HasPrefix(lk, "webhook-"):
		return "", "", fmt.Errorf("%q: webhook- headers carry the signature (see --secret)", s)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return "", "", fmt.Errorf("header %s: the value holds a control character", k)
		}
	}
	return k, v, nil
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110 tchar).
func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// SecretPrefix starts a Standard Webhooks signing secret.
const SecretPrefix = "whsec_"

// ParseSecret reads a Standard Webhooks signing secret: base64, with or without the whsec_
// prefix, as the Standard Webhooks libraries read it. The key is the decoded bytes.
func ParseSecret(s string) ([]byte, error) {
	b64 := strings.TrimPrefix(strings.TrimSpace(s), SecretPrefix)
	if b64 == "" {
		return nil, errors.New("the secret is empty")
	}
	key, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || strings.ContainsAny(b64, "\r\n") { // the decoder skips line breaks
		return nil, errors.New("the secret is not base64 (a Standard Webhooks secret looks like whsec_ followed by base64, such as openssl rand -base64 32 prints)")
	}
	if len(key) == 0 {
		return nil, errors.New("the secret is empty")
	}
	return key, nil
}
