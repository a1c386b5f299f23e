package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/pkg/retry"
)

// signalSender sends Evented API signals and treats replies as that spec asks of a
// generator: 2xx is success; only 500, 503 and 504 are retried, honouring Retry-After;
// 410 Gone means stop for good; redirects are followed; any other reply is a failure with
// the consumer's reason.
type signalSender struct {
	url         string
	format      string // form, json or get
	hc          *http.Client
	maxAttempts int
	onRetry     func(attempt int, delay time.Duration, err error)
}

// signalOf maps a CloudEvent made by emit to signal attributes: _domain and _name from the
// type (split at its last dot), _timestamp from time, and data's members.
func signalOf(event []byte) (url.Values, []byte, error) {
	typ := gjson.GetBytes(event, "type").String()
	i := strings.LastIndexByte(typ, '.')
	if i <= 0 || i == len(typ)-1 {
		return nil, nil, usagef("--signal needs --type DOMAIN.NAME (the signal's _domain and _name), got %q", typ)
	}
	v := url.Values{}
	v.Set("_domain", typ[:i])
	v.Set("_name", typ[i+1:])
	obj := map[string]any{"_domain": typ[:i], "_name": typ[i+1:]}
	if t := gjson.GetBytes(event, "time"); t.Exists() {
		v.Set("_timestamp", t.String())
		obj["_timestamp"] = t.String()
	}
	data := gjson.GetBytes(event, "data")
	if data.Exists() && !data.IsObject() {
		return nil, nil, usagef("--signal sends --data as attributes: it must be a JSON object")
	}
	data.ForEach(func(k, val gjson.Result) bool {
		v.Add(k.String(), val.String())
		obj[k.String()] = val.Value()
		return true
	})
	js, err := json.Marshal(obj)
	return v, js, err
}

func (s *signalSender) send(ctx context.Context, event []byte) (int, error) {
	form, js, err := signalOf(event)
	if err != nil {
		return 0, err
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		status, wait, err := s.attempt(ctx, form, js)
		if err == nil {
			return status, nil
		}
		lastErr = err
		if wait < 0 || attempt >= s.maxAttempts {
			return 0, lastErr
		}
		d := max(retry.Delay(attempt-1, 200*time.Millisecond, 15*time.Second), wait)
		if s.onRetry != nil {
			s.onRetry(attempt, d, err)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// attempt sends once; wait < 0 means the failure is final.
func (s *signalSender) attempt(ctx context.Context, form url.Values, js []byte) (int, time.Duration, error) {
	var req *http.Request
	var err error
	switch s.format {
	case "get":
		u := s.url
		if strings.Contains(u, "?") {
			u += "&" + form.Encode()
		} else {
			u += "?" + form.Encode()
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	case "json":
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(js))
		if req != nil {
			req.Header.Set("Content-Type", "application/json")
		}
	default:
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, s.url, strings.NewReader(form.Encode()))
		if req != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	if err != nil {
		return 0, -1, usagef("--signal: %v", err)
	}
	req.Header.Set("User-Agent", "evtctl/"+versionString())
	resp, err := s.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, -1, ctx.Err()
		}
		return 0, 0, fmt.Errorf("cannot reach the consumer: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	reason := strings.TrimSpace(string(body))
	if r := gjson.Get(reason, "error"); r.Exists() {
		reason = r.String()
	}
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return code, 0, nil
	case code == http.StatusGone:
		return 0, -1, fmt.Errorf("the consumer answered 410 Gone: it takes no more signals; stopping")
	case code == 500 || code == 503 || code == 504:
		ra, _ := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return 0, ra, fmt.Errorf("the consumer answered %d: %s", code, reason)
	default:
		return 0, -1, fmt.Errorf("the consumer refused the signal (%d): %s", code, reason)
	}
}
