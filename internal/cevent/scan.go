package cevent

import (
	"bytes"
	"fmt"
	"unicode/utf8"
	"unsafe"

	"github.com/evtctl/evtctl/internal/swar"

	"github.com/evtctl/evtctl/internal/jsonspace"
)

// maxDepth bounds the nesting of arrays and objects inside one JSON value.
const maxDepth = 1000

// dupMapThreshold is the number of members after which duplicate detection
// inside one object switches from a linear search to a map.
const dupMapThreshold = 16

// span is a half-open byte range.
type span struct{ start, end int }

// scanner is a single-pass JSON validator and compactor. It reads s.in from
// s.pos; copyValue appends the compact form of a value to s.out. Every
// object's member names are checked for duplicates.
//
// Inside a value the scanner does not copy token by token: s.in[s.mark:s.pos]
// is input that is still to be copied, and it is flushed to s.out only
// where whitespace is dropped, so compact input is copied in one piece.
type scanner struct {
	in    []byte
	pos   int
	mark  int
	out   []byte
	depth int

	// keys holds the member names of the open objects: a name without
	// escapes is a range of in; an escaped one is decoded into keyBuf and
	// its range is stored with keyBufFlag set in start.
	keys   []span
	keyBuf []byte

	// badString is set when scanString fails in strict mode because of
	// a character CloudEvents strings must not contain (not a JSON error).
	badString bool
	// quiet: the caller only asks whether the input is JSON; every failure is errQuiet,
	// whose message nobody reads, and costs no allocation to say.
	quiet bool
}

// errQuiet is a quiet scanner's every error.
var errQuiet = &Error{Status: 400, Index: -1, Msg: "invalid JSON"}

func (s *scanner) errorf(format string, args ...any) *Error {
	if s.quiet {
		return errQuiet
	}
	return &Error{Status: 400, Index: -1, Msg: fmt.Sprintf(format, args...)}
}

// syntaxErr reports malformed JSON at the current position.
func (s *scanner) syntaxErr(what string) *Error {
	if s.quiet {
		return errQuiet
	}
	if s.pos >= len(s.in) {
		return s.errorf("invalid JSON: unexpected end of input, %s", what)
	}
	return s.errorf("invalid JSON at byte offset %d: unexpected %s, %s", s.pos, describeByte(s.in[s.pos]), what)
}

func describeByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (s *scanner) skipWS() { s.pos = jsonspace.Skip(s.in, s.pos) }

// skipSpace skips whitespace inside a value being copied, first flushing
// the input not yet copied. It is small enough to be inlined: compact input,
// the common case, costs one comparison.
func (s *scanner) skipSpace() {
	if s.pos < len(s.in) && s.in[s.pos] <= ' ' {
		s.dropSpace()
	}
}

// dropSpace is skipSpace where there may be whitespace. It is kept out of line, so that
// skipSpace stays small.
//
//go:noinline
func (s *scanner) dropSpace() {
	if !jsonspace.Is(s.in[s.pos]) {
		return
	}
	s.out = append(s.out, s.in[s.mark:s.pos]...)
	s.skipWS()
	s.mark = s.pos
}

// copyValue scans the JSON value at s.pos (whitespace already skipped) and
// appends its compact form to s.out.
func (s *scanner) copyValue() *Error {
	s.mark = s.pos
	if err := s.value(); err != nil {
		return err
	}
	s.out = append(s.out, s.in[s.mark:s.pos]...)
	return nil
}

// peek returns the byte at the current position, or 0 at the end of input.
func (s *scanner) peek() byte {
	if s.pos < len(s.in) {
		return s.in[s.pos]
	}
	return 0
}

// isNoncharacter reports whether r is a Unicode noncharacter.
func isNoncharacter(r rune) bool {
	return r >= 0xfdd0 && r <= 0xfdef || r&0xfffe == 0xfffe
}

// scanString scans the JSON string starting at s.pos (an opening quote) and
// returns the range of its raw content between the quotes and whether that
// content contains escape sequences. It does not write to s.out.
//
// In strict mode the string must also be a valid CloudEvents String: no
// control characters (U+0000-U+001F, U+007F-U+009F), no noncharacters and no
// unpaired surrogates, whether written raw or escaped. Such a failure sets
// s.badString, and the message is to be prefixed with the attribute's name.
func (s *scanner) scanString(strict bool) (content span, esc bool, err *Error) {
	s.badString = false
	in := s.in
	i := s.pos + 1
	start := i
	for {
		i = swar.Plain(in, i)
		if i >= len(in) {
			s.pos = i
			return span{}, false, s.errorf("invalid JSON: unterminated string starting at byte offset %d", start-1)
		}
		c := in[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return span{start, i}, esc, nil
		case c == '\\':
			esc = true
			if i+1 >= len(in) {
				s.pos = i
				return span{}, false, s.errorf("invalid JSON: unterminated string starting at byte offset %d", start-1)
			}
			switch in[i+1] {
			case '"', '\\', '/':
				i += 2
			case 'b', 'f', 'n', 'r', 't':
				if strict {
					s.badString = true
					return span{}, false, s.errorf("contains a control character (escape \\%c at byte offset %d); CloudEvents strings must not", in[i+1], i)
				}
				i += 2
			case 'u':
				r, ok := hex4(in, i+2)
				if !ok {
					s.pos = i
					return span{}, false, s.errorf("invalid JSON at byte offset %d: invalid \\u escape", i)
				}
				n := 6
				if r >= 0xd800 && r < 0xdc00 {
					if r2, ok := hex4(in, i+8); ok && in[i+6] == '\\' && in[i+7] == 'u' && r2 >= 0xdc00 && r2 < 0xe000 {
						r = (r-0xd800)<<10 + (r2 - 0xdc00) + 0x10000
						n = 12
					}
				}
				if strict {
					if msg := badStringRune(r); msg != "" {
						s.badString = true
						return span{}, false, s.errorf("contains %s (escape at byte offset %d); CloudEvents strings must not", msg, i)
					}
				}
				i += n
			default:
				s.pos = i
				return span{}, false, s.errorf("invalid JSON at byte offset %d: invalid escape sequence \\%c", i, in[i+1])
			}
		case c < 0x20:
			s.pos = i
			return span{}, false, s.errorf("invalid JSON at byte offset %d: control character 0x%02x in string must be escaped", i, c)
		case c == 0x7f:
			if strict {
				s.badString = true
				return span{}, false, s.errorf("contains the control character U+007F (at byte offset %d); CloudEvents strings must not", i)
			}
			i++
		default:
			r, size := utf8.DecodeRune(in[i:])
			if r == utf8.RuneError && size == 1 {
				s.pos = i
				return span{}, false, s.errorf("invalid JSON at byte offset %d: invalid UTF-8 in string", i)
			}
			if strict {
				if msg := badStringRune(r); msg != "" {
					s.badString = true
					return span{}, false, s.errorf("contains %s (at byte offset %d); CloudEvents strings must not", msg, i)
				}
			}
			i += size
		}
	}
}

// badStringRune describes why r may not appear in a CloudEvents String, or
// returns "" if it may.
func badStringRune(r rune) string {
	switch {
	case r < 0x20 || r >= 0x7f && r <= 0x9f:
		return fmt.Sprintf("the control character %U", r)
	case r >= 0xd800 && r < 0xe000:
		return fmt.Sprintf("the unpaired surrogate %U", r)
	case isNoncharacter(r):
		return fmt.Sprintf("the noncharacter %U", r)
	}
	return ""
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// appendUnescaped appends the decoded form of raw, the already validated
// content of a JSON string, to dst. Unpaired surrogates become U+FFFD.
func appendUnescaped(dst, raw []byte) []byte {
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\\')
		if i < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:i]...)
		raw = raw[i:]
		switch c := raw[1]; c {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw, 2)
			if r >= 0xd800 && r < 0xdc00 && len(raw) >= 12 && raw[6] == '\\' && raw[7] == 'u' {
				if r2, ok := hex4(raw, 8); ok && r2 >= 0xdc00 && r2 < 0xe000 {
					dst = utf8.AppendRune(dst, (r-0xd800)<<10+(r2-0xdc00)+0x10000)
					raw = raw[12:]
					continue
				}
			}
			dst = utf8.AppendRune(dst, r) // AppendRune writes U+FFFD for surrogates
			raw = raw[6:]
			continue
		default: // '"', '\\', '/'
			dst = append(dst, c)
		}
		raw = raw[2:]
	}
	return dst
}

// scanNumber scans a JSON number at s.pos and returns its range and whether
// it is written as an integer (no fraction, no exponent).
func (s *scanner) scanNumber() (sp span, isInt bool, err *Error) {
	in := s.in
	i := s.pos
	if i < len(in) && in[i] == '-' {
		i++
	}
	switch {
	case i < len(in) && in[i] == '0':
		i++
	case i < len(in) && in[i] >= '1' && in[i] <= '9':
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	default:
		s.pos = i
		return span{}, false, s.syntaxErr("expected a digit")
	}
	isInt = true
	if i < len(in) && in[i] == '.' {
		isInt = false
		i++
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			s.pos = i
			return span{}, false, s.syntaxErr("expected a digit after the decimal point")
		}
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	}
	if i < len(in) && (in[i] == 'e' || in[i] == 'E') {
		isInt = false
		i++
		if i < len(in) && (in[i] == '+' || in[i] == '-') {
			i++
		}
		if i >= len(in) || in[i] < '0' || in[i] > '9' {
			s.pos = i
			return span{}, false, s.syntaxErr("expected a digit in the exponent")
		}
		for i < len(in) && in[i] >= '0' && in[i] <= '9' {
			i++
		}
	}
	sp = span{s.pos, i}
	s.pos = i
	return sp, isInt, nil
}

// literal consumes the literal word (true, false or null) at s.pos.
func (s *scanner) literal(word string) *Error {
	if len(s.in)-s.pos < len(word) || string(s.in[s.pos:s.pos+len(word)]) != word {
		return s.syntaxErr("expected a JSON value")
	}
	s.pos += len(word)
	return nil
}

// value scans any JSON value at s.pos (whitespace already skipped). Use
// copyValue to also copy it.
func (s *scanner) value() *Error {
	switch c := s.peek(); c {
	case '{':
		return s.object()
	case '[':
		return s.array()
	case '"':
		_, _, err := s.scanString(false)
		return err
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c != '-' && (c < '0' || c > '9') {
			return s.syntaxErr("expected a JSON value")
		}
		_, _, err := s.scanNumber()
		return err
	}
}

func (s *scanner) array() *Error {
	if s.depth++; s.depth > maxDepth {
		return s.errorf("invalid JSON at byte offset %d: nested more than %d levels deep", s.pos, maxDepth)
	}
	s.pos++
	s.skipSpace()
	if s.peek() == ']' {
		s.pos++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case ']':
			s.pos++
			s.depth--
			return nil
		default:
			return s.syntaxErr("expected ',' or ']' in array")
		}
	}
}

// objectKeys tracks the member names of one open object for duplicate
// detection.
type objectKeys struct {
	base, bufBase int
	m             map[string]struct{}
}

func (s *scanner) openKeys() objectKeys {
	return objectKeys{base: len(s.keys), bufBase: len(s.keyBuf)}
}

func (s *scanner) closeKeys(k objectKeys) {
	s.keys = s.keys[:k.base]
	s.keyBuf = s.keyBuf[:k.bufBase]
}

// keyBufFlag marks a key span that indexes keyBuf rather than in.
const keyBufFlag = 1 << 62

func (s *scanner) keyName(sp span) []byte {
	if sp.start&keyBufFlag != 0 {
		return s.keyBuf[sp.start&^keyBufFlag : sp.end]
	}
	return s.in[sp.start:sp.end]
}

// key scans a member name at s.pos, records it in k, and returns the raw
// (still escaped) name range and the decoded name. The decoded name is only
// valid until the next call that records a name. It fails on a duplicate.
func (s *scanner) key(k *objectKeys) (raw span, name []byte, err *Error) {
	if s.peek() != '"' {
		return span{}, nil, s.syntaxErr("expected a string (member name)")
	}
	at := s.pos
	raw, esc, err := s.scanString(false)
	if err != nil {
		return span{}, nil, err
	}
	sp := raw
	if esc {
		nb := len(s.keyBuf)
		s.keyBuf = appendUnescaped(s.keyBuf, s.in[raw.start:raw.end])
		sp = span{nb | keyBufFlag, len(s.keyBuf)}
	}
	name = s.keyName(sp)
	if k.m != nil {
		if _, dup := k.m[string(name)]; dup {
			return span{}, nil, s.errorf("invalid JSON at byte offset %d: duplicate member name %q", at, name)
		}
		k.m[string(name)] = struct{}{}
	} else {
		for _, prev := range s.keys[k.base:] {
			if prev.end-prev.start&^keyBufFlag == len(name) && string(s.keyName(prev)) == string(name) {
				return span{}, nil, s.errorf("invalid JSON at byte offset %d: duplicate member name %q", at, name)
			}
		}
		if len(s.keys)-k.base >= dupMapThreshold {
			k.m = make(map[string]struct{}, 2*dupMapThreshold)
			for _, prev := range s.keys[k.base:] {
				k.m[string(s.keyName(prev))] = struct{}{}
			}
			k.m[string(name)] = struct{}{}
		}
	}
	s.keys = append(s.keys, sp)
	return raw, name, nil
}

// colon consumes the ':' after a member name, with surrounding whitespace,
// outside a value being copied.
func (s *scanner) colon() *Error {
	s.skipWS()
	if s.peek() != ':' {
		return s.syntaxErr("expected ':' after member name")
	}
	s.pos++
	s.skipWS()
	return nil
}

func (s *scanner) object() *Error {
	if s.depth++; s.depth > maxDepth {
		return s.errorf("invalid JSON at byte offset %d: nested more than %d levels deep", s.pos, maxDepth)
	}
	s.pos++
	s.skipSpace()
	if s.peek() == '}' {
		s.pos++
		s.depth--
		return nil
	}
	k := s.openKeys()
	for {
		if _, _, err := s.key(&k); err != nil {
			return err
		}
		s.skipSpace()
		if s.peek() != ':' {
			return s.syntaxErr("expected ':' after member name")
		}
		s.pos++
		s.skipSpace()
		if err := s.value(); err != nil {
			return err
		}
		s.skipSpace()
		switch s.peek() {
		case ',':
			s.pos++
			s.skipSpace()
		case '}':
			s.pos++
			s.closeKeys(k)
			s.depth--
			return nil
		default:
			return s.syntaxErr("expected ',' or '}' in object")
		}
	}
}

// appendJSONString appends s as a JSON string. s must be valid UTF-8.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	b := unsafe.Slice(unsafe.StringData(s), len(s)) // read only
	for i := 0; ; {
		j := swar.Unescaped(b, i) // the run that needs no escape, eight bytes at a time
		dst = append(dst, s[i:j]...)
		if j == len(s) {
			return append(dst, '"')
		}
		switch c := s[j]; c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hexDigits = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i = j + 1
	}
}
