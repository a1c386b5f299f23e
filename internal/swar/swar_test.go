package swar

import (
	"math/bits"
	"testing"
)

// plainByBytes is Plain a byte at a time.
func plainByBytes(b []byte, i int) int {
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

func TestMasksEveryByte(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			// c at pos among bytes that no mask marks, and among bytes that every mask marks
			for _, fill := range []byte{'a', 0} {
				var w [8]byte
				for k := range w {
					w[k] = fill
				}
				w[pos] = byte(c)
				x := Load(w[:], 0)
				at := uint64(0x80) << (8 * pos)
				check := func(name string, m uint64, want bool) {
					if got := m&at != 0; got != want {
						t.Fatalf("%s: byte %#x at %d among %#x: marked %v", name, c, pos, fill, got)
					}
					if m&^MSB != 0 {
						t.Fatalf("%s(%x) sets bits other than the high ones", name, x)
					}
				}
				check("Zero", Zero(x), c == 0)
				check("Ctl", Ctl(x), c < 0x20)
				check("Eq", Eq(x, '"'), c == '"')
				if fill == 'a' {
					if m := Zero(x) | Ctl(x) | Eq(x, '"'); m != 0 && bits.TrailingZeros64(m)/8 != pos {
						t.Fatalf("byte %#x at %d: lowest mark at %d", c, pos, bits.TrailingZeros64(m)/8)
					}
				}
			}
		}
	}
}

func TestPlain(t *testing.T) {
	for _, tc := range []struct {
		in   string
		from int
		want int
	}{
		{"", 0, 0},
		{"abc", 0, 3},
		{`abcdefghijklmnop"`, 0, 16},
		{`abcdefgh\"`, 0, 8},
		{"abcdefghijk\x7fz", 0, 11},
		{"abcdefghijké", 0, 11},
		{"abc\tdef", 0, 3},
		{`"x`, 0, 0},
		{`ab"cdefghijklmnopq`, 3, 18},
	} {
		if got := Plain([]byte(tc.in), tc.from); got != tc.want {
			t.Errorf("Plain(%q, %d) = %d, want %d", tc.in, tc.from, got, tc.want)
		}
	}
}

// Plain stops at every byte it must, wherever it is among the words it reads (either of a
// pair, or the tail read a byte at a time), and at nothing else.
func TestPlainEveryByte(t *testing.T) {
	for c := range 256 {
		for n := 1; n <= 24; n++ {
			for at := range n {
				w := make([]byte, n)
				for k := range w {
					w[k] = 'a' + byte(k%26)
				}
				w[at] = byte(c)
				want := plainByBytes(w, 0)
				if got := Plain(w, 0); got != want {
					t.Fatalf("Plain(%q) = %d, want %d", w, got, want)
				}
			}
		}
	}
}

// BenchmarkPlain scans a long run of plain text, as a JSON string's padding or prose.
func BenchmarkPlain(b *testing.B) {
	s := make([]byte, 600)
	for i := range s {
		s[i] = 'a' + byte(i%26)
	}
	s[len(s)-1] = '"'
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if Plain(s, 0) != len(s)-1 {
			b.Fatal("stopped early")
		}
	}
}

func FuzzPlain(f *testing.F) {
	f.Add([]byte(`{"id":"e-1","data":"caf\u00e9 \"q\""}`), 2)
	f.Add([]byte("abcdefgh\x7fijklmnop\x00"), 0)
	f.Fuzz(func(t *testing.T, b []byte, from int) {
		if from < 0 || from > len(b) {
			return
		}
		if got, want := Plain(b, from), plainByBytes(b, from); got != want {
			t.Fatalf("Plain(%q, %d) = %d, byte by byte %d", b, from, got, want)
		}
	})
}

// Unescaped stops at '"', '\\' and the control bytes, wherever they are among eight, and at
// nothing else.
func TestUnescapedEveryByte(t *testing.T) {
	for c := range 256 {
		for at := range 8 {
			w := []byte("abcdefgh")
			w[at] = byte(c)
			want := 8
			if c == '"' || c == '\\' || c < 0x20 {
				want = at
			}
			if got := Unescaped(w, 0); got != want {
				t.Fatalf("Unescaped(%q) = %d, want %d", w, got, want)
			}
		}
	}
}

func FuzzUnescaped(f *testing.F) {
	f.Add([]byte(`caf\u00e9 "q" ✓ tail`), 0)
	f.Add([]byte("abcdefgh\x01ijklmnop"), 3)
	f.Fuzz(func(t *testing.T, b []byte, from int) {
		if from < 0 || from > len(b) {
			return
		}
		want := from
		for want < len(b) && !(b[want] < 0x20 || b[want] == '"' || b[want] == '\\') {
			want++
		}
		if got := Unescaped(b, from); got != want {
			t.Fatalf("Unescaped(%q, %d) = %d, byte by byte %d", b, from, got, want)
		}
	})
}
