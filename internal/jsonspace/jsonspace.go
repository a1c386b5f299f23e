// Package jsonspace holds JSON's insignificant whitespace, for the hand-written JSON scanners
// of the client, the node and the CloudEvents decoder: space, tab, line feed and carriage
// return (RFC 8259, section 2), nothing else.
package jsonspace

// Is reports whether c is JSON whitespace.
func Is(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Skip returns the offset of the first byte of b at or after i that is not JSON whitespace,
// len(b) when there is none.
func Skip(b []byte, i int) int {
	for i < len(b) && Is(b[i]) {
		i++
	}
	return i
}
