package render

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/evtctl/evtctl/internal/swar"

	"github.com/mattn/go-runewidth"
)

var nullJSON = []byte("null")

// bytesString views b as a string without copying. The string must not outlive the call
// that made it, nor be used after b changes.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// stringBytes views s as bytes without copying; the bytes must not be written.
func stringBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// isCompact reports whether s holds no tab, newline or carriage return, and no space
// outside strings: valid JSON for which it is true is already compact (valid JSON holds no
// other control byte). It does not validate. Without escaped quotes or backslashes, quotes
// alternate opening and closing strings, so the common case is a few vectorised scans of
// the bytes package; otherwise s is read eight bytes at a time.
func isCompact(s string) bool {
	b := stringBytes(s)
	if bytes.IndexByte(b, '\n') >= 0 || bytes.IndexByte(b, '\r') >= 0 || bytes.IndexByte(b, '\t') >= 0 {
		return false
	}
	if bytes.IndexByte(b, '\\') >= 0 && (bytes.Contains(b, escQuote) || bytes.Contains(b, escEsc)) {
		return swarCompact(b, 0)
	}
	var in uint64 // swar.MSB inside a string, else 0
	for range 8 {
		j := bytes.IndexByte(b, ' ')
		if j < 0 {
			return true
		}
		if bytes.Count(b[:j], quote)%2 == 1 {
			in ^= swar.MSB
		}
		if in == 0 {
			return false
		}
		b = b[j+1:]
	}
	return swarCompact(b, in) // many spaces: one pass is cheaper
}

var (
	quote    = []byte{'"'}
	escQuote = []byte{'\\', '"'}
	escEsc   = []byte{'\\', '\\'}
)

// swarCompact is isCompact on b, starting inside a string when in is swar.MSB. It reads eight
// bytes at a time, and one at a time where there is a backslash. It also refuses the
// other control bytes.
func swarCompact(b []byte, in uint64) bool {
	i := 0
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		if swar.Ctl(x) != 0 {
			return false
		}
		if swar.Zero(x^(swar.LSB*'\\')) != 0 {
			var ok bool
			if i, in, ok = scanBytes(b, i, i+8, in); !ok {
				return false
			}
			continue
		}
		// Bit 7 of byte k of p: inside a string at byte k (a prefix XOR of the quotes).
		p := swar.Zero(x ^ (swar.LSB * '"'))
		p ^= p << 8
		p ^= p << 16
		p ^= p << 32
		p ^= in
		if swar.Zero(x^(swar.LSB*' '))&^p != 0 {
			return false
		}
		in = -(p >> 63) & swar.MSB
		i += 8
	}
	_, _, ok := scanBytes(b, i, len(b), in)
	return ok
}

// scanBytes is swarCompact a byte at a time, over b[i:end]. It returns where it stopped,
// which is past end when an escape there covers the next byte.
func scanBytes(b []byte, i, end int, in uint64) (int, uint64, bool) {
	for ; i < end; i++ {
		switch c := b[i]; {
		case c < 0x20:
			return i, in, false
		case c == '"':
			in ^= swar.MSB
		case c == '\\' && in != 0:
			i++ // the escaped byte
			if i < len(b) && b[i] < 0x20 {
				return i, in, false
			}
		case c == ' ' && in == 0:
			return i, in, false
		}
	}
	return i, in, true
}

// appendCompact appends the JSON in s without insignificant whitespace. Input that needs
// no compacting is copied as is, unvalidated (it comes from a decoder); other input is
// compacted by encoding/json, which refuses it if it is not valid JSON. Either way the
// result holds no newline.
func appendCompact(dst []byte, s string) ([]byte, error) {
	if isCompact(s) {
		return append(dst, s...), nil
	}
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, stringBytes(s)); err != nil {
		return dst, err
	}
	return buf.Bytes(), nil
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD; HTML
// characters are left alone.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, "\ufffd"...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}

// UnsafeRune reports whether a terminal might act on r rather than show it: C0 and C1
// controls, DEL, line and paragraph separators, and bidirectional overrides.
func UnsafeRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x2028, r == 0x2029, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// ellipsis marks a value cut short; ellipsisWidth is the columns it takes (2 where the
// locale makes East Asian ambiguous characters wide). It is found on first use, not when
// the package loads: go-runewidth builds its tables on the first rune above U+02FF, which
// takes milliseconds that every evtctl command, most of which never cut a value, would pay.
const ellipsis = "…"

var ellipsisWidth = sync.OnceValue(func() int { return runewidth.RuneWidth('…') })

// runeCols is the columns r takes once appendDisplay has written it: 6 for a rune written
// as a \uXXXX escape, else its width on a terminal (0 for combining marks, 2 for wide
// characters). Invalid UTF-8 is shown as U+FFFD, one column.
func runeCols(r rune) int {
	switch {
	case r < utf8.RuneSelf:
		if r < 0x20 || r == 0x7f {
			return 6
		}
		return 1
	case UnsafeRune(r):
		return 6
	}
	return runewidth.RuneWidth(r)
}

// appendDisplay appends s for a terminal: runes a terminal could act on are written as
// \uXXXX escapes, invalid UTF-8 as U+FFFD. With json set, whitespace outside JSON strings
// is dropped. Output wider than limit columns (an escape counts 6, a wide character 2)
// is cut to at most limit, "…" included (limit <= 0: no limit). It returns the columns
// written.
func appendDisplay(dst []byte, s string, limit int, json bool) ([]byte, int) {
	const hex = "0123456789abcdef"
	in, esc := false, false // inside a JSON string; after a backslash in one
	start := len(dst)
	cols, cut, cutCols := 0, len(dst), 0 // the last place where "…" would still fit
	ew := 0
	if limit > 0 {
		ew = ellipsisWidth()
	}
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		i += n
		if json {
			switch {
			case esc:
				esc = false
			case in && r == '\\':
				esc = true
			case r == '"':
				in = !in
			case !in && (r == ' ' || r == '\t' || r == '\n' || r == '\r'):
				continue
			}
		}
		w := runeCols(r)
		if limit > 0 && cols+w > limit {
			if cutCols+ew > limit {
				return dst[:start], 0
			}
			return append(dst[:cut], ellipsis...), cutCols + ew
		}
		cols += w
		switch {
		case r == utf8.RuneError && n == 1:
			dst = append(dst, "\ufffd"...)
		case w == 6:
			dst = append(dst, '\\', 'u', hex[r>>12&0xf], hex[r>>8&0xf], hex[r>>4&0xf], hex[r&0xf])
		default:
			dst = append(dst, s[i-n:i]...)
		}
		if cols+ew <= limit {
			cut, cutCols = len(dst), cols
		}
	}
	return dst, cols
}

// appendDisplayEnd is appendDisplay without json, keeping the end of a value too wide
// for limit columns rather than its start: "…" and as much of the end as fits.
func appendDisplayEnd(dst []byte, s string, limit int) ([]byte, int) {
	total := 0
	for _, r := range s {
		total += runeCols(r)
	}
	if total <= limit || limit <= 0 {
		return appendDisplay(dst, s, 0, false)
	}
	ew := ellipsisWidth()
	if limit < ew {
		return dst, 0
	}
	i := 0
	for i < len(s) && total > limit-ew {
		r, n := utf8.DecodeRuneInString(s[i:])
		total -= runeCols(r)
		i += n
	}
	for i < len(s) { // a combining mark would join the "…"
		r, n := utf8.DecodeRuneInString(s[i:])
		if runeCols(r) != 0 {
			break
		}
		i += n
	}
	dst = append(dst, ellipsis...)
	dst, n := appendDisplay(dst, s[i:], 0, false)
	return dst, n + ew
}
