package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/deliver"
)

// signalSender sends Evented API signals through deliver's Client with the Evented API's
// policy (deliver.EventedAPIPolicy): 2xx is success; only 500, 503 and 504 are retried,
// honouring Retry-After; 410 Gone means stop for good; redirects are followed as
// deliver.Policy says; any other reply is a failure with the consumer's reason.
type signalSender struct {
	format string // form, json or get
	c      *deliver.Client
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
	var req deliver.Request
	switch s.format {
	case "get":
		req = deliver.Request{Method: http.MethodGet, Query: form.Encode()}
	case "json":
		req = deliver.Request{Header: http.Header{"Content-Type": {"application/json"}}, Body: js}
	default:
		req = deliver.Request{Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(form.Encode())}
	}
	a, err := s.c.Do(ctx, req)
	var se *deliver.StatusError
	switch {
	case err == nil:
		return a.Status, nil
	case ctx.Err() != nil:
		return 0, err
	case errors.Is(err, deliver.ErrGone):
		return 0, fmt.Errorf("the consumer answered 410 Gone: it takes no more signals; stopping")
	case errors.As(err, &se) && a.Verdict == deliver.Failed && se.Status >= 500:
		return 0, fmt.Errorf("the consumer answered %d: %s (the Evented API retries only 500, 503 and 504)", se.Status, a.Reason)
	case errors.As(err, &se) && a.Verdict == deliver.Failed:
		return 0, fmt.Errorf("the consumer refused the signal (%d): %s", se.Status, a.Reason)
	case a.Verdict == deliver.Failed: // a redirect it would not follow
		return 0, err
	case a.Status == 0:
		return 0, fmt.Errorf("cannot reach the consumer: %w", err)
	}
	return 0, fmt.Errorf("the consumer answered %d: %w", a.Status, err)
}
