package jsonspace

import "testing"

func TestSkip(t *testing.T) {
	for _, tc := range []struct {
		in       string
		from, at int
	}{
		{"", 0, 0},
		{" \t\r\n{", 0, 4},
		{"{ }", 1, 2},
		{"   ", 1, 3},
		{"\v\f{", 0, 0},   // not JSON whitespace
		{"\u00a0{", 0, 0}, // nor a no-break space
		{"x", 5, 5},       // past the end stays put
	} {
		if got := Skip([]byte(tc.in), tc.from); got != tc.at {
			t.Errorf("Skip(%q, %d) = %d, want %d", tc.in, tc.from, got, tc.at)
		}
	}
}
