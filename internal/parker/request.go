package parker

import (
	"bytes"

	"github.com/evtctl/evtctl/pkg/wire"
)

// The parker's own request parser. It reads only the requests a
// long-polling client sends over and over, in the plainest form HTTP/1.1 allows:
//
//	POST / HTTP/1.1                       GET /events?after=… HTTP/1.1
//	Host: node:7480                       Host: node:7480
//	Content-Length: 97                    Authorization: Bearer …
//	Content-Type: application/json
//
//	{"jsonrpc":"2.0","id":7,…}
//
// with the whole request at hand. Anything else — another method or path, HTTP/1.0, a
// chunked body, Expect or Upgrade, a header folded or holding bytes outside printable ASCII,
// a line ended by LF alone, a request cut short — is left to net/http, which reads it from
// the start. What it takes, net/http takes too, and reads the same way (FuzzParseRequest).

type parseStatus int

const (
	parseOK   parseStatus = iota // a whole request
	parseMore                    // the start of one that this parser may take: read on
	parseNo                      // not one this parser takes: net/http's to read
)

// maxRequestHead bounds what the parser reads before a request's body: a long-poll's
// headers are a few hundred bytes.
const maxRequestHead = 2048

// parseRequest reads the request at the start of b. With parseOK it also returns the
// request's length in b; the request's fields point into b.
func parseRequest(b []byte) (req Request, n int, st parseStatus) {
	i := 0
	switch {
	case bytes.HasPrefix(b, []byte("POST ")):
		i = 5
	case bytes.HasPrefix(b, []byte("GET ")):
		req.Get, i = true, 4
	case bytes.HasPrefix([]byte("POST "), b), bytes.HasPrefix([]byte("GET "), b):
		return req, 0, parseMore
	default:
		return req, 0, parseNo
	}
	// The request-target: "/" for a JSON-RPC call, "/events" with or without a query for
	// a GET.
	start := i
	for i < len(b) && b[i] != ' ' {
		if !queryByte[b[i]] {
			return req, 0, parseNo
		}
		i++
	}
	if i == len(b) {
		return req, 0, more(len(b))
	}
	req.Target = b[start:i]
	if req.Get {
		path, query, _ := bytes.Cut(req.Target, []byte("?"))
		if string(path) != wire.PathEvents {
			return req, 0, parseNo
		}
		req.Query = query
	} else if string(req.Target) != wire.PathRPC {
		return req, 0, parseNo
	}
	const proto = " HTTP/1.1\r\n"
	if rest := b[i:]; !bytes.HasPrefix(rest, []byte(proto)) {
		if bytes.HasPrefix([]byte(proto), rest) {
			return req, 0, more(len(b))
		}
		return req, 0, parseNo
	}
	i += len(proto)

	length := -1
	var hosts, auths, conns int
	for {
		if i+2 > len(b) {
			return req, 0, more(i)
		}
		if b[i] == '\r' {
			if b[i+1] != '\n' {
				return req, 0, parseNo
			}
			i += 2
			break
		}
		// A field: a name of token characters, a colon, a value of printable ASCII with
		// spaces and tabs inside it, CRLF.
		nameStart := i
		for i < len(b) && tokenByte[b[i]] {
			i++
		}
		if i == len(b) {
			return req, 0, more(i)
		}
		if i == nameStart || b[i] != ':' {
			return req, 0, parseNo
		}
		name := b[nameStart:i]
		i++
		for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
			i++
		}
		valStart := i
		for i < len(b) && (b[i] == ' ' || b[i] == '\t' || (b[i] > ' ' && b[i] < 0x7f)) {
			i++
		}
		if i+1 >= len(b) {
			return req, 0, more(i)
		}
		if b[i] != '\r' || b[i+1] != '\n' {
			return req, 0, parseNo
		}
		val := bytes.TrimRight(b[valStart:i], " \t")
		i += 2
		switch {
		case asciiEqualFold(name, "Host"):
			hosts++
			req.Host = val
		case asciiEqualFold(name, "Content-Length"):
			if length >= 0 {
				return req, 0, parseNo
			}
			if length = contentLength(val); length < 0 {
				return req, 0, parseNo
			}
		case asciiEqualFold(name, "Authorization"):
			auths++
			req.Auth = val
		case asciiEqualFold(name, "Connection"):
			conns++
			switch {
			case asciiEqualFold(val, "close"):
				req.Close = true
			case asciiEqualFold(val, "keep-alive"):
			default:
				return req, 0, parseNo
			}
		case asciiEqualFold(name, "Transfer-Encoding"), asciiEqualFold(name, "Expect"),
			asciiEqualFold(name, "Upgrade"), asciiEqualFold(name, "Trailer"), asciiEqualFold(name, "TE"):
			return req, 0, parseNo
		}
		if i > maxRequestHead {
			return req, 0, parseNo
		}
	}
	if hosts != 1 || !validHost(req.Host) || auths > 1 || conns > 1 {
		return req, 0, parseNo
	}
	switch {
	case req.Get && length > 0, !req.Get && length < 0:
		// A GET with a body, or a POST whose body's end is not given by its length.
		return req, 0, parseNo
	case length < 0:
		length = 0
	}
	if len(b)-i < length {
		return req, 0, more(i + length)
	}
	req.Body = b[i : i+length]
	return req, i + length, parseOK
}

// more says to read on while a request of at least n bytes may still be one the parser
// takes.
func more(n int) parseStatus {
	if n > maxRequestHead+maxFastBody {
		return parseNo
	}
	return parseMore
}

// maxFastBody bounds the body of a request the parser takes; a long-poll's is about 200
// bytes.
const maxFastBody = 2048

// contentLength reads a Content-Length of at most four digits; -1 when it is not one.
func contentLength(v []byte) int {
	if len(v) == 0 || len(v) > 4 {
		return -1
	}
	n := 0
	for _, c := range v {
		if c < '0' || c > '9' {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	if n > maxFastBody {
		return -1
	}
	return n
}

// validHost accepts a host name or IPv4 address with an optional port, or an IPv6 address
// in brackets with one: fewer forms than net/http takes.
func validHost(h []byte) bool {
	if len(h) == 0 || len(h) > 255 {
		return false
	}
	for _, c := range h {
		if !hostByte[c] {
			return false
		}
	}
	return true
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c, d := b[i], s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if 'A' <= d && d <= 'Z' {
			d += 'a' - 'A'
		}
		if c != d {
			return false
		}
	}
	return true
}

// tokenByte: the characters of a header name (RFC 9110's tchar).
// queryByte: those of a request-target's path and query (RFC 3986's pchar, '/' and '?').
// hostByte: those of the host forms validHost takes.
var tokenByte, queryByte, hostByte = func() (t, q, h [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c], q[c], h[c] = true, true, true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], q[c], h[c] = true, true, true
		t[c-'a'+'A'], q[c-'a'+'A'], h[c-'a'+'A'] = true, true, true
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	for _, c := range []byte("-._~!$&'()*+,;=:@/?%") {
		q[c] = true
	}
	for _, c := range []byte("-.:[]") {
		h[c] = true
	}
	return
}()
