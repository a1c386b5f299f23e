package redisstream

import (
	"errors"
	"fmt"
	"unsafe"
)

// A reply of XRANGE, XREVRANGE or XREAD's stream is read from the bytes of the reply as
// the server sent it (RESP2 or RESP3), without copying: an entry's id and its fields' names
// and values are strings that share the reply's memory.

// rawEntry is one entry of a reply.
type rawEntry struct {
	id     string
	fields []field // name and value, in the entry's order; a name may come twice
}

type field struct{ name, value string }

// respReader reads RESP values from b.
type respReader struct {
	b   []byte
	pos int
}

// errProtocol is a reply that is not of the shape a command of streams answers with.
var errProtocol = errors.New("the Redis server's reply is not of the expected shape")

// ServerError is an error the server answered a command with: "ERR no such key",
// "WRONGTYPE …", "NOAUTH …".
type ServerError struct{ Msg string }

func (e *ServerError) Error() string { return e.Msg }

func (r *respReader) line() ([]byte, error) {
	start := r.pos
	for i := start; i+1 < len(r.b); i++ {
		if r.b[i] == '\r' && r.b[i+1] == '\n' {
			r.pos = i + 2
			return r.b[start:i], nil
		}
	}
	return nil, errProtocol
}

// header reads a value's type and its length (or -1 for a null); a server error is a
// *ServerError.
func (r *respReader) header() (byte, int, error) {
	l, err := r.line()
	if err != nil || len(l) == 0 {
		return 0, 0, errProtocol
	}
	t := l[0]
	switch t {
	case '-', '!':
		msg := string(l[1:])
		if t == '!' { // a RESP3 blob error: the length, then the message
			n, ok := atoi(l[1:])
			if !ok || n < 0 || r.pos+n+2 > len(r.b) {
				return 0, 0, errProtocol
			}
			msg = string(r.b[r.pos : r.pos+n])
			r.pos += n + 2
		}
		return t, 0, &ServerError{Msg: msg}
	case '_': // RESP3 null
		return t, -1, nil
	case '*', '%', '$', '~', '>':
		n, ok := atoi(l[1:])
		if !ok {
			return 0, 0, errProtocol
		}
		return t, n, nil
	}
	return 0, 0, errProtocol
}

// array reads an array's (or set's) length; a map counts as an array of its keys and values.
func (r *respReader) array() (int, error) {
	t, n, err := r.header()
	switch {
	case err != nil:
		return 0, err
	case t == '%' && n >= 0:
		return 2 * n, nil
	case t == '*' || t == '~' || t == '_':
		return n, nil
	}
	return 0, errProtocol
}

// str reads a bulk string, sharing the reply's memory.
func (r *respReader) str() (string, error) {
	t, n, err := r.header()
	if err != nil {
		return "", err
	}
	if t != '$' || n < 0 || r.pos+n+2 > len(r.b) || r.b[r.pos+n] != '\r' || r.b[r.pos+n+1] != '\n' {
		return "", errProtocol
	}
	s := unsafe.String(unsafe.SliceData(r.b[r.pos:]), n)
	if n == 0 {
		s = ""
	}
	r.pos += n + 2
	return s, nil
}

func atoi(b []byte) (int, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 10 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if neg {
		return -n, true
	}
	return n, true
}

// readEntries reads the reply of XRANGE or XREVRANGE: an array of entries, each an array of
// the id and the flat list of field names and values. Entries are appended to dst, fields
// to fieldBuf (which they share). A null reply is no entries.
func readEntries(b []byte, dst []rawEntry, fieldBuf []field) ([]rawEntry, []field, error) {
	r := respReader{b: b}
	n, err := r.array()
	if err != nil {
		return dst, fieldBuf, err
	}
	if n < 0 {
		return dst, fieldBuf, nil
	}
	if n > len(b)/4 {
		return dst, fieldBuf, errProtocol
	}
	// Each entry's fields are a window of fieldBuf; when it grows, the windows taken before
	// keep the array they were taken from.
	for i := 0; i < n; i++ {
		var e rawEntry
		if e, fieldBuf, err = r.entry(fieldBuf); err != nil {
			return dst, fieldBuf, err
		}
		dst = append(dst, e)
	}
	if r.pos != len(b) {
		return dst, fieldBuf, fmt.Errorf("%w (%d bytes after the entries)", errProtocol, len(b)-r.pos)
	}
	return dst, fieldBuf, nil
}

func (r *respReader) entry(fieldBuf []field) (rawEntry, []field, error) {
	if n, err := r.array(); err != nil || n != 2 {
		return rawEntry{}, fieldBuf, cmpErr(err)
	}
	id, err := r.str()
	if err != nil {
		return rawEntry{}, fieldBuf, err
	}
	m, err := r.array()
	if err != nil {
		return rawEntry{}, fieldBuf, err
	}
	if m < 0 {
		m = 0 // an entry with no fields (a deleted one, in some replies)
	}
	if m%2 != 0 || m > len(r.b)-r.pos {
		return rawEntry{}, fieldBuf, errProtocol
	}
	start := len(fieldBuf)
	for j := 0; j < m; j += 2 {
		name, err := r.str()
		if err != nil {
			return rawEntry{}, fieldBuf, err
		}
		value, err := r.str()
		if err != nil {
			return rawEntry{}, fieldBuf, err
		}
		fieldBuf = append(fieldBuf, field{name, value})
	}
	return rawEntry{id: id, fields: fieldBuf[start:len(fieldBuf):len(fieldBuf)]}, fieldBuf, nil
}

func cmpErr(err error) error {
	if err != nil {
		return err
	}
	return errProtocol
}

// unsafeBytes is s's bytes, shared: for reading only.
func unsafeBytes(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}
