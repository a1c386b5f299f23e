package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// eventsParams is the decoded request of the `events` method, in the spelling of a
// Tendermint node (filter.query, maxItems, after, before, waitTime in nanoseconds), with the
// ADR's spellings (max_results, wait_time), duration strings for the wait, and evtctl's
// ascending-order extension (order: "asc") accepted too.
type eventsParams struct {
	Query     string
	MaxItems  int
	After     string
	Before    string
	Wait      time.Duration // 0: the server's default
	Ascending bool
}

// paramError is a request that cannot be decoded: JSON-RPC -32602 Invalid params.
type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

func badParam(format string, args ...any) error { return &paramError{fmt.Sprintf(format, args...)} }

// decodeParams reads JSON-RPC params: an object, a positional array
// [filter, maxItems, after, before, waitTime], or absent (all defaults).
func decodeParams(raw json.RawMessage) (eventsParams, error) {
	var p eventsParams
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return p, nil
	}
	switch raw[0] {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return p, badParam("params: %v", err)
		}
		return p, p.setAll(func(names ...string) (json.RawMessage, string) {
			for _, n := range names {
				if v, ok := m[n]; ok {
					return v, n
				}
			}
			return nil, names[0]
		})
	case '[':
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil {
			return p, badParam("params: %v", err)
		}
		if len(a) > 5 {
			return p, badParam("params: at most 5 positional values [filter, maxItems, after, before, waitTime], got %d", len(a))
		}
		order := []string{"filter", "maxItems", "after", "before", "waitTime"}
		return p, p.setAll(func(names ...string) (json.RawMessage, string) {
			for i, n := range order {
				if n == names[0] && i < len(a) {
					return a[i], n
				}
			}
			return nil, names[0]
		})
	default:
		return p, badParam("params must be an object such as {\"maxItems\":10} or an array [filter, maxItems, after, before, waitTime]")
	}
}

func (p *eventsParams) setAll(get func(names ...string) (json.RawMessage, string)) error {
	if v, name := get("filter"); isSet(v) {
		q, err := decodeFilter(v)
		if err != nil {
			return badParam("%s: %v", name, err)
		}
		p.Query = q
	}
	if v, name := get("maxItems", "max_results", "max_items"); isSet(v) {
		n, err := decodeInt(v)
		if err != nil {
			return badParam("%s: %v", name, err)
		}
		p.MaxItems = n
	}
	for _, c := range []struct {
		dst  *string
		name string
	}{{&p.After, "after"}, {&p.Before, "before"}} {
		if v, name := get(c.name); isSet(v) {
			if err := json.Unmarshal(v, c.dst); err != nil {
				return badParam("%s: want a cursor string, got %s", name, abbreviate(v))
			}
		}
	}
	if v, name := get("waitTime", "wait_time"); isSet(v) {
		d, err := decodeWait(v)
		if err != nil {
			return badParam("%s: %v", name, err)
		}
		p.Wait = d
	}
	if v, name := get("order"); isSet(v) {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return badParam("%s: want \"asc\" or \"desc\", got %s", name, abbreviate(v))
		}
		asc, err := parseOrder(s)
		if err != nil {
			return badParam("%s: %v", name, err)
		}
		p.Ascending = asc
	}
	return nil
}

func isSet(v json.RawMessage) bool { return len(v) > 0 && !bytes.Equal(v, []byte("null")) }

// decodeFilter accepts {"query": "..."} as Tendermint sends it, or a bare query string.
func decodeFilter(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var f struct {
		Query *string `json:"query"`
	}
	if err := json.Unmarshal(v, &f); err != nil {
		return "", fmt.Errorf("want an object {\"query\": \"...\"}, got %s", abbreviate(v))
	}
	if f.Query == nil {
		return "", nil
	}
	return *f.Query, nil
}

func decodeInt(v json.RawMessage) (int, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err != nil {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return 0, fmt.Errorf("want a number, got %s", abbreviate(v))
		}
		n = json.Number(s)
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want a whole number, got %s", abbreviate(v))
	}
	return clampInt(i), nil
}

// clampInt brings a count into the range of a 32-bit int.
func clampInt(i int64) int { return int(max(min(i, 1<<31), -1<<31)) }

// decodeWait accepts a JSON number of nanoseconds (Tendermint's form), a string of digits
// (nanoseconds), or a Go duration string such as "5s" or "1m30s".
func decodeWait(v json.RawMessage) (time.Duration, error) {
	var n json.Number
	if err := json.Unmarshal(v, &n); err == nil {
		return parseWait(string(n))
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return 0, fmt.Errorf("want nanoseconds as a number or a duration such as \"5s\", got %s", abbreviate(v))
	}
	return parseWait(s)
}

func parseWait(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if !(f >= 0 && f <= float64(1<<62)) { // also refuses NaN, which ParseFloat accepts
			return 0, fmt.Errorf("wait of %s nanoseconds is out of range", s)
		}
		return time.Duration(f), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want nanoseconds as a number or a duration such as \"5s\", got %q", s)
	}
	return d, nil
}

func parseOrder(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "asc", "ascending":
		return true, nil
	case "", "desc", "descending":
		return false, nil
	}
	return false, fmt.Errorf("want \"asc\" or \"desc\", got %q", s)
}

func abbreviate(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:40]) + "..."
	}
	return string(v)
}

// paramsFromQuery reads the GET form: /events?maxItems=3&waitTime=1000000000&before="<cursor>".
// Values may be quoted, as Tendermint's GET handler expects, or bare. Unlike Tendermint, the
// filter can be given, as query= (or filter=).
func paramsFromQuery(q url.Values) (eventsParams, error) {
	var p eventsParams
	get := func(names ...string) (string, string, bool) {
		for _, n := range names {
			if vs, ok := q[n]; ok && len(vs) > 0 {
				return unquote(vs[0]), n, true
			}
		}
		return "", names[0], false
	}
	if s, _, ok := get("query", "filter"); ok {
		p.Query = s
	}
	if s, name, ok := get("maxItems", "max_results", "max_items"); ok && s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return p, badParam("%s: want a whole number, got %q", name, s)
		}
		p.MaxItems = n
	}
	if s, _, ok := get("after"); ok {
		p.After = s
	}
	if s, _, ok := get("before"); ok {
		p.Before = s
	}
	if s, name, ok := get("waitTime", "wait_time"); ok && s != "" {
		d, err := parseWait(s)
		if err != nil {
			return p, badParam("%s: %v", name, err)
		}
		p.Wait = d
	}
	if s, name, ok := get("order"); ok {
		asc, err := parseOrder(s)
		if err != nil {
			return p, badParam("%s: %v", name, err)
		}
		p.Ascending = asc
	}
	return p, nil
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		var u string
		if json.Unmarshal([]byte(s), &u) == nil {
			return u
		}
		return s[1 : len(s)-1]
	}
	return s
}
