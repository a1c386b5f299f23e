package server

import (
	"bytes"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/evtctl/evtctl/internal/jsonspace"
	"github.com/evtctl/evtctl/pkg/wire"
)

// decodeCallFast decodes the request object a long-polling client sends over and over, such
// as {"jsonrpc":"2.0","id":7,"method":"events","params":{"maxItems":1,"after":"…","waitTime":30000000000}},
// without reflection. It accepts only a plain subset of JSON (the members jsonrpc, id,
// method and params, each once and spelled so; params with maxItems, after, before, waitTime
// and order, each once and spelled so; strings without escapes or non-ASCII bytes; whole
// numbers) and only a valid call with an id, on which it gives what decodeCallSlow gives. On
// anything else (a notification too) it returns false, and decodeCallSlow decodes the request
// and words its errors.
func decodeCallFast(raw []byte) (json.RawMessage, eventsParams, bool) {
	d := fastDecoder{b: raw}
	var id []byte
	var p eventsParams
	var seen [4]bool // jsonrpc, id, method, params
	if !d.open('{') {
		return nil, eventsParams{}, false
	}
	for first := true; ; first = false {
		if d.close('}') {
			if first || !seen[0] || !seen[1] || !seen[2] {
				return nil, eventsParams{}, false
			}
			break
		}
		if !first && !d.open(',') {
			return nil, eventsParams{}, false
		}
		key, ok := d.key()
		if !ok {
			return nil, eventsParams{}, false
		}
		var k int
		switch string(key) {
		case wire.KeyJSONRPC:
			k = 0
			ok = d.word(wire.Version)
		case wire.KeyID:
			k = 1
			if id, ok = d.token(); ok {
				id = bytes.Clone(id)
			}
		case wire.KeyMethod:
			k = 2
			ok = d.word(wire.Method)
		case wire.KeyParams:
			k = 3
			ok = d.params(&p)
		default:
			return nil, eventsParams{}, false
		}
		if !ok || seen[k] {
			return nil, eventsParams{}, false
		}
		seen[k] = true
	}
	d.space()
	if d.i != len(d.b) {
		return nil, eventsParams{}, false
	}
	return id, p, true
}

// lastCursor is the cursor string the fast decoder made last: the long-polls of many clients
// following the head name the same cursor, and each takes this one rather than a copy.
var lastCursor internedString

// internedString holds the last string made by intern.
type internedString struct{ p atomic.Pointer[string] }

// intern returns b as a string: the one made last when it is the same.
func (is *internedString) intern(b []byte) string {
	if last := is.p.Load(); last != nil && *last == string(b) {
		return *last
	}
	s := string(b)
	is.p.Store(&s)
	return s
}

type fastDecoder struct {
	b []byte
	i int
}

func (d *fastDecoder) space() { d.i = jsonspace.Skip(d.b, d.i) }

// open consumes c after any space.
func (d *fastDecoder) open(c byte) bool {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *fastDecoder) close(c byte) bool { return d.open(c) }

// str consumes a string of printable ASCII with no escapes and returns its contents.
func (d *fastDecoder) str() ([]byte, bool) {
	d.space()
	if d.i >= len(d.b) || d.b[d.i] != '"' {
		return nil, false
	}
	for j := d.i + 1; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			s := d.b[d.i+1 : j]
			d.i = j + 1
			return s, true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// key consumes a member name and its colon.
func (d *fastDecoder) key() ([]byte, bool) {
	s, ok := d.str()
	if !ok || !d.open(':') {
		return nil, false
	}
	return s, true
}

// word consumes a string that must be w.
func (d *fastDecoder) word(w string) bool {
	s, ok := d.str()
	return ok && string(s) == w
}

// integer consumes a whole number of at most 18 digits, as JSON writes it.
func (d *fastDecoder) integer() ([]byte, bool) {
	d.space()
	start := d.i
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(d.b) && '0' <= d.b[j] && d.b[j] <= '9' {
		j++
	}
	n := j - digits
	if n == 0 || n > 18 || (n > 1 && d.b[digits] == '0') {
		return nil, false
	}
	if j < len(d.b) {
		switch d.b[j] {
		case '.', 'e', 'E':
			return nil, false
		}
	}
	d.i = j
	return d.b[start:j], true
}

// token consumes an id: a whole number or a string, as its JSON text.
func (d *fastDecoder) token() ([]byte, bool) {
	d.space()
	if d.i < len(d.b) && d.b[d.i] == '"' {
		start := d.i
		if _, ok := d.str(); !ok {
			return nil, false
		}
		return d.b[start:d.i], true
	}
	return d.integer()
}

func (d *fastDecoder) params(p *eventsParams) bool {
	if !d.open('{') {
		return false
	}
	var seen [5]bool // maxItems, after, before, waitTime, order
	for first := true; ; first = false {
		if d.close('}') {
			return true
		}
		if !first && !d.open(',') {
			return false
		}
		key, ok := d.key()
		if !ok {
			return false
		}
		var k int
		switch string(key) {
		case wire.ParamMaxItems:
			k = 0
			var n []byte
			if n, ok = d.integer(); ok {
				p.MaxItems = clampInt(digits(n))
			}
		case wire.ParamAfter, wire.ParamBefore:
			k = 1
			dst := &p.After
			if string(key) == wire.ParamBefore {
				k, dst = 2, &p.Before
			}
			var s []byte
			if s, ok = d.str(); ok {
				*dst = lastCursor.intern(s)
			}
		case wire.ParamWaitTime:
			k = 3
			var n []byte
			if n, ok = d.integer(); ok {
				if len(n) <= 15 {
					// Exact in a float64, as parseWait reads it.
					p.Wait = max(time.Duration(digits(n)), 0)
				} else {
					var err error
					p.Wait, err = parseWait(string(n))
					ok = err == nil
				}
			}
		case wire.ParamOrder:
			k = 4
			var s []byte
			if s, ok = d.str(); ok {
				var err error
				p.Ascending, err = parseOrder(string(s))
				ok = err == nil
			}
		default:
			return false
		}
		if !ok || seen[k] {
			return false
		}
		seen[k] = true
	}
}

// digits reads a whole number that integer consumed (at most 18 digits: it fits).
func digits(n []byte) int64 {
	neg := n[0] == '-'
	if neg {
		n = n[1:]
	}
	var v int64
	for _, c := range n {
		v = v*10 + int64(c-'0')
	}
	if neg {
		return -v
	}
	return v
}
