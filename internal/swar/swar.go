// Package swar reads eight bytes at a time in a uint64 (SIMD within a register), for the
// hand-written JSON scanners of the renderer and the CloudEvents decoder. Each mask marks
// exactly the bytes it names (no carries between bytes), so the lowest marked byte of a
// word is the first such byte of the eight.
package swar

import (
	"encoding/binary"
	"math/bits"
)

// Masks for working on the eight bytes of a uint64 at once.
const (
	LSB = 0x0101010101010101 // the low bit of each byte
	MSB = 0x8080808080808080 // the high bit of each byte
	lo7 = 0x7f7f7f7f7f7f7f7f
)

// Zero has the high bit set in each byte of x that is zero, and no other bit set.
func Zero(x uint64) uint64 {
	return ^(((x & lo7) + lo7) | x) & MSB
}

// Ctl has the high bit set in each byte of x below 0x20, and no other bit set.
func Ctl(x uint64) uint64 {
	return ^(((x & lo7) + LSB*0x60) | x) & MSB
}

// Eq has the high bit set in each byte of x equal to c, and no other bit set.
func Eq(x uint64, c byte) uint64 { return Zero(x ^ (LSB * uint64(c))) }

// Load is the eight bytes of b from i, the first in the low byte.
func Load(b []byte, i int) uint64 { return binary.LittleEndian.Uint64(b[i:]) }

// Plain is the end of the run of bytes from i that a JSON string holds as they are and a
// scanner need not look at: printable ASCII (0x20 to 0x7e) other than '"' and '\'. It is
// the index of the first other byte, or len(b).
func Plain(b []byte, i int) int {
	for ; i+16 <= len(b); i += 16 {
		w := b[i : i+16]
		m0, m1 := notPlain(Load(w, 0)), notPlain(Load(w, 8))
		if m0|m1 != 0 {
			if m0 != 0 {
				return i + bits.TrailingZeros64(m0)/8
			}
			return i + 8 + bits.TrailingZeros64(m1)/8
		}
	}
	if i+8 <= len(b) {
		if m := notPlain(Load(b, i)); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// notPlain has the high bit set in each byte of x that Plain stops at, and no other bit
// set. It works on each byte's low seven bits with the high bit set, from which subtracting
// at most 0x20 borrows from no other byte: the sum of Ctl, x&MSB and three Eq in fewer steps.
func notPlain(x uint64) uint64 {
	y := x | MSB
	lt := y - LSB*0x20                // high bit clear: the low seven bits are below 0x20
	quote := (y ^ LSB*'"') - LSB      // clear: they are '"'
	backslash := (y ^ LSB*'\\') - LSB // clear: they are '\'
	del := (x &^ MSB) + LSB           // set: they are 0x7f
	return (x | ^(lt & quote & backslash) | del) & MSB
}

// Unescaped is the end of the run of bytes from i that a JSON string may hold as they are:
// everything but '"', '\' and the control bytes below 0x20 (UTF-8 is not checked). It is
// the index of the first such byte, or len(b).
func Unescaped(b []byte, i int) int {
	for ; i+8 <= len(b); i += 8 {
		if m := escaped(Load(b, i)); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if c := b[i]; c < 0x20 || c == '"' || c == '\\' {
			return i
		}
	}
	return i
}

// escaped has the high bit set in each byte of x that Unescaped stops at, and no other bit
// set: notPlain's tests but for 0x7f, of the bytes whose own high bit is clear.
func escaped(x uint64) uint64 {
	y := x | MSB
	lt := y - LSB*0x20
	quote := (y ^ LSB*'"') - LSB
	backslash := (y ^ LSB*'\\') - LSB
	return ^(lt & quote & backslash) &^ x & MSB
}
