package eventgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/swar"

	"github.com/evtctl/evtctl/internal/jsonspace"
)

// The members of a line that Complete fills in when they are missing (absent or null).
const (
	MissingSpecversion = 1 << iota
	MissingID
	MissingTime
)

// Line is what Inspect found in a JSON line.
type Line struct {
	// ID is the text of the id member's value as the line writes it, quotes included, when
	// it is a string; nil when the id is missing or not a string.
	ID []byte
	// IDAt is where ID starts in the line.
	IDAt int
	// Missing has a Missing* bit for each member Complete would add.
	Missing int
}

// IDString returns the id as encoding/json decodes it: unescaped, with each byte that is not
// UTF-8 replaced by U+FFFD; "" when Line.ID is nil.
func (l Line) IDString() string {
	if len(l.ID) < 2 {
		return ""
	}
	if bytes.IndexByte(l.ID, '\\') < 0 && utf8.Valid(l.ID) {
		return string(l.ID[1 : len(l.ID)-1])
	}
	var s string
	_ = json.Unmarshal(l.ID, &s)
	return s
}

// maxNesting is the deepest nesting of arrays and objects Inspect follows: encoding/json's.
const maxNesting = 10000

// Inspect checks that line is one JSON object, whitespace around it aside, and finds its
// id and which of specversion, id and time it lacks.
//
// It is not the node's decoder (cevent's scanner) on purpose: that one takes only complete,
// valid CloudEvents and copies their attributes out, while a line given to emit may lack the
// members Complete fills in, and its CloudEvents rules are the node's to apply (or lint's,
// with --strict). Here only the JSON is checked, on the path of every event emit sends. It accepts exactly what json.Valid
// accepts when the value is an object; like it, it does not check that strings are UTF-8.
// Of a member given twice, the last counts, as when encoding/json decodes a map.
func Inspect(line []byte) (Line, error) {
	s := lineScanner{b: line}
	s.i = jsonspace.Skip(line, 0)
	if s.i == len(line) {
		return Line{}, fmt.Errorf("not a JSON object: the line is empty")
	}
	if line[s.i] != '{' {
		if s.value() == nil && jsonspace.Skip(line, s.i) == len(line) {
			return Line{}, fmt.Errorf("not a JSON object: %.40q", bytes.TrimSpace(line))
		}
		return Line{}, s.failure()
	}
	var l Line
	l.Missing = MissingSpecversion | MissingID | MissingTime
	if err := s.object(&l); err != nil {
		return Line{}, err
	}
	if s.i = jsonspace.Skip(line, s.i); s.i < len(line) {
		return Line{}, s.errorf("after the object")
	}
	return l, nil
}

// lineScanner validates JSON text in one pass.
type lineScanner struct {
	b     []byte
	i     int
	depth int
	err   error
}

func (s *lineScanner) errorf(what string) error {
	if s.err == nil {
		if s.i >= len(s.b) {
			s.err = fmt.Errorf("invalid JSON: the line ends %s", what)
		} else {
			c := s.b[s.i]
			d := fmt.Sprintf("byte 0x%02x", c)
			if c >= 0x20 && c < 0x7f {
				d = fmt.Sprintf("%q", rune(c))
			}
			s.err = fmt.Errorf("invalid JSON at column %d: unexpected %s %s", s.i+1, d, what)
		}
	}
	return s.err
}

// failure returns the error of a failed scan.
func (s *lineScanner) failure() error {
	if s.err == nil {
		return s.errorf("after the value")
	}
	return s.err
}

// object scans an object at s.i; with l, it notes the top-level members Line reports.
func (s *lineScanner) object(l *Line) error {
	if s.depth++; s.depth > maxNesting {
		return s.errorf("(nested too deeply)")
	}
	s.i++ // '{'
	s.i = jsonspace.Skip(s.b, s.i)
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.errorf("where a member name should be")
		}
		k0 := s.i
		esc, err := s.str()
		if err != nil {
			return err
		}
		name := s.b[k0:s.i]
		s.i = jsonspace.Skip(s.b, s.i)
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.errorf("after a member name")
		}
		s.i = jsonspace.Skip(s.b, s.i+1)
		v0 := s.i
		if err := s.value(); err != nil {
			return err
		}
		if l != nil {
			l.note(name, esc, s.b[v0:s.i], v0)
		}
		s.i = jsonspace.Skip(s.b, s.i)
		if s.i >= len(s.b) {
			return s.errorf("in an object")
		}
		switch s.b[s.i] {
		case ',':
			s.i = jsonspace.Skip(s.b, s.i+1)
		case '}':
			s.i++
			s.depth--
			return nil
		default:
			return s.errorf("after an object member")
		}
	}
}

// note records a top-level member: name is its quoted name, v its value, at v's offset.
func (l *Line) note(name []byte, esc bool, v []byte, at int) {
	key := name[1 : len(name)-1]
	if esc {
		var k string
		if json.Unmarshal(name, &k) != nil {
			return
		}
		key = []byte(k)
	}
	var bit int
	switch string(key) {
	case "specversion":
		bit = MissingSpecversion
	case "id":
		bit = MissingID
		l.ID = nil
		if v[0] == '"' {
			l.ID, l.IDAt = v, at
		}
	case "time":
		bit = MissingTime
	default:
		return
	}
	if string(v) == "null" {
		l.Missing |= bit
	} else {
		l.Missing &^= bit
	}
}

func (s *lineScanner) array() error {
	if s.depth++; s.depth > maxNesting {
		return s.errorf("(nested too deeply)")
	}
	s.i = jsonspace.Skip(s.b, s.i+1)
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return nil
	}
	for {
		if err := s.value(); err != nil {
			return err
		}
		s.i = jsonspace.Skip(s.b, s.i)
		if s.i >= len(s.b) {
			return s.errorf("in an array")
		}
		switch s.b[s.i] {
		case ',':
			s.i = jsonspace.Skip(s.b, s.i+1)
		case ']':
			s.i++
			s.depth--
			return nil
		default:
			return s.errorf("after an array element")
		}
	}
}

// value scans any JSON value at s.i.
func (s *lineScanner) value() error {
	if s.i >= len(s.b) {
		return s.errorf("where a value should be")
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object(nil)
	case c == '[':
		return s.array()
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return s.errorf("where a value should be")
}

func (s *lineScanner) literal(w string) error {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		for j := 0; j < len(w) && s.i < len(s.b) && s.b[s.i] == w[j]; j++ {
			s.i++
		}
		return s.errorf("in a literal (true, false or null)")
	}
	s.i += len(w)
	return nil
}

func (s *lineScanner) number() error {
	b := s.b
	if b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(b) && b[s.i] == '0':
		s.i++
	case s.i < len(b) && b[s.i] >= '1' && b[s.i] <= '9':
		s.digits()
	default:
		return s.errorf("in a number")
	}
	if s.i < len(b) && b[s.i] == '.' {
		s.i++
		if s.i >= len(b) || b[s.i] < '0' || b[s.i] > '9' {
			return s.errorf("after a decimal point")
		}
		s.digits()
	}
	if s.i < len(b) && (b[s.i] == 'e' || b[s.i] == 'E') {
		s.i++
		if s.i < len(b) && (b[s.i] == '+' || b[s.i] == '-') {
			s.i++
		}
		if s.i >= len(b) || b[s.i] < '0' || b[s.i] > '9' {
			return s.errorf("in an exponent")
		}
		s.digits()
	}
	return nil
}

func (s *lineScanner) digits() {
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
}

// str scans a string at s.i, leaving s.i after its closing quote; esc reports an escape.
func (s *lineScanner) str() (esc bool, err error) {
	b := s.b
	i := s.i + 1
	for {
		i = swar.Unescaped(b, i)
		if i >= len(b) {
			s.i = i
			return esc, s.errorf("in a string")
		}
		switch b[i] {
		case '"':
			s.i = i + 1
			return esc, nil
		case '\\':
			esc = true
			i++
			if i >= len(b) {
				s.i = i
				return esc, s.errorf("in an escape")
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				i++
				for range 4 {
					if i >= len(b) || !isHex(b[i]) {
						s.i = i
						return esc, s.errorf("in a \\u escape")
					}
					i++
				}
			default:
				s.i = i
				return esc, s.errorf("in an escape")
			}
		default: // a control character
			s.i = i
			return esc, s.errorf("in a string (control characters must be escaped)")
		}
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }
