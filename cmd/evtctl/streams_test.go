package main

import (
	"bytes"

	"github.com/evtctl/evtctl/internal/iostreams"
)

// testStreams returns streams backed by buffers, none of them a terminal.
func testStreams() (s *iostreams.IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &iostreams.IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}
