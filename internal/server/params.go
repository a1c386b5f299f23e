package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/jsonspace"
	"github.com/evtctl/evtctl/pkg/wire"
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

// member is a name and its value in a params object.
type member struct {
	name string
	val  json.RawMessage
}

// decodeParams reads JSON-RPC params: an object, a positional array
// [filter, maxItems, after, before, waitTime], or absent (all defaults).
//
// An object is read as a Tendermint node reads it (Go's encoding/json into its request
// struct): a member name matches a parameter exactly or else without regard to case, and the
// members are applied in order, so that of two for one parameter the last wins, null leaves
// a parameter as it was (but takes the filter away), and a second filter object adds to the
// first.
func decodeParams(raw json.RawMessage) (eventsParams, error) {
	var p eventsParams
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return p, nil
	}
	var ms []member
	switch raw[0] {
	case '{':
		var err error
		if ms, err = objectMembers(raw); err != nil {
			return p, badParam("params: %v", err)
		}
	case '[':
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil {
			return p, badParam("params: %v", err)
		}
		if len(a) > len(wire.Positional) {
			return p, badParam("params: at most 5 positional values [filter, maxItems, after, before, waitTime], got %d", len(a))
		}
		for i, v := range a {
			ms = append(ms, member{wire.Positional[i], v})
		}
	default:
		return p, badParam("params must be an object such as {\"maxItems\":10} or an array [filter, maxItems, after, before, waitTime]")
	}
	return p, p.setAll(ms)
}

// objectMembers returns the members of a JSON object in order, names unescaped. It splits
// the object by hand once it is known to be valid: a json.Decoder walking its tokens costs
// twice as much.
func objectMembers(raw []byte) ([]member, error) {
	if !json.Valid(raw) || raw[0] != '{' {
		var v map[string]any
		return nil, json.Unmarshal(raw, &v) // for the decoder's words
	}
	// raw is valid JSON and starts with '{': one object, nothing after it.
	ms := make([]member, 0, 8)
	for i := 1; ; {
		i = jsonspace.Skip(raw, i)
		switch raw[i] {
		case '}':
			return ms, nil
		case ',':
			i = jsonspace.Skip(raw, i+1)
		}
		end := valueEnd(raw, i)
		key := raw[i:end]
		var name string
		if bytes.IndexByte(key, '\\') < 0 && utf8.Valid(key) {
			name = string(key[1 : len(key)-1])
		} else if err := json.Unmarshal(key, &name); err != nil {
			return nil, err
		}
		i = jsonspace.Skip(raw, jsonspace.Skip(raw, end)+1) // past the colon
		end = valueEnd(raw, i)
		ms = append(ms, member{name, raw[i:end]})
		i = end
	}
}

// valueEnd returns the offset just past the JSON value that starts at i of valid JSON.
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the object holding a number or a literal
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// pick returns the members that set a parameter, in order: those whose name matches the
// first of names that any member matches (exactly or without regard to case), so that a
// Tendermint spelling is preferred to the ADR's.
func pick(ms []member, names ...string) []member {
	for _, n := range names {
		var got []member
		for _, m := range ms {
			if strings.EqualFold(m.name, n) {
				got = append(got, m)
			}
		}
		if got != nil {
			return got
		}
	}
	return nil
}

func isNull(v json.RawMessage) bool { return bytes.Equal(v, []byte("null")) }

func (p *eventsParams) setAll(ms []member) error {
	for _, m := range pick(ms, wire.ParamFilter) {
		if err := p.setFilter(m.val); err != nil {
			return badParam("%s: %v", m.name, err)
		}
	}
	for _, m := range pick(ms, wire.ParamMaxItems, wire.AltMaxResults, wire.AltMaxItems) {
		if isNull(m.val) {
			continue
		}
		n, err := decodeInt(m.val)
		if err != nil {
			return badParam("%s: %v", m.name, err)
		}
		p.MaxItems = n
	}
	for _, c := range []struct {
		dst  *string
		name string
	}{{&p.After, wire.ParamAfter}, {&p.Before, wire.ParamBefore}} {
		for _, m := range pick(ms, c.name) {
			if isNull(m.val) {
				continue
			}
			if err := json.Unmarshal(m.val, c.dst); err != nil {
				return badParam("%s: want a cursor string, got %s", m.name, abbreviate(m.val))
			}
		}
	}
	for _, m := range pick(ms, wire.ParamWaitTime, wire.AltWaitTime) {
		if isNull(m.val) {
			continue
		}
		d, err := decodeWait(m.val)
		if err != nil {
			return badParam("%s: %v", m.name, err)
		}
		p.Wait = d
	}
	for _, m := range pick(ms, wire.ParamOrder) {
		if isNull(m.val) {
			continue
		}
		var s string
		if err := json.Unmarshal(m.val, &s); err != nil {
			return badParam("%s: want \"asc\" or \"desc\", got %s", m.name, abbreviate(m.val))
		}
		asc, err := parseOrder(s)
		if err != nil {
			return badParam("%s: %v", m.name, err)
		}
		p.Ascending = asc
	}
	return nil
}

// setFilter applies one filter value: {"query": "..."} as Tendermint sends it, which adds to
// what came before as decoding into the same struct does; a bare query string; or null, which
// takes the filter away.
func (p *eventsParams) setFilter(v json.RawMessage) error {
	if isNull(v) {
		p.Query = ""
		return nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		p.Query = s
		return nil
	}
	f := wire.Filter{Query: p.Query}
	if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &f) != nil {
		return fmt.Errorf("want an object {\"query\": \"...\"}, got %s", abbreviate(v))
	}
	p.Query = f.Query
	return nil
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

// parseWait reads a wait. A negative one is taken as a Tendermint node takes it, for the
// shortest wait the node allows, which is also its default: here, 0 for the server's default.
func parseWait(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		if !(f >= -float64(1<<62) && f <= float64(1<<62)) { // also refuses NaN, which ParseFloat accepts
			return 0, fmt.Errorf("wait of %s nanoseconds is out of range", s)
		}
		return max(time.Duration(f), 0), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("want nanoseconds as a number or a duration such as \"5s\", got %q", s)
	}
	return max(d, 0), nil
}

func parseOrder(s string) (bool, error) {
	switch strings.ToLower(s) {
	case wire.OrderAsc, "ascending":
		return true, nil
	case "", wire.OrderDesc, "descending":
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
	if s, _, ok := get(wire.ParamQuery, wire.ParamFilter); ok {
		p.Query = s
	}
	if s, name, ok := get(wire.ParamMaxItems, wire.AltMaxResults, wire.AltMaxItems); ok && s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return p, badParam("%s: want a whole number, got %q", name, s)
		}
		p.MaxItems = n
	}
	if s, _, ok := get(wire.ParamAfter); ok {
		p.After = s
	}
	if s, _, ok := get(wire.ParamBefore); ok {
		p.Before = s
	}
	if s, name, ok := get(wire.ParamWaitTime, wire.AltWaitTime); ok && s != "" {
		d, err := parseWait(s)
		if err != nil {
			return p, badParam("%s: %v", name, err)
		}
		p.Wait = d
	}
	if s, name, ok := get(wire.ParamOrder); ok {
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
