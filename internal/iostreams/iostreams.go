// Package iostreams holds a command's standard streams and what is known about them.
package iostreams

import (
	"io"
	"os"
	"strconv"

	"github.com/charmbracelet/x/term"
	"github.com/mattn/go-isatty"
)

// IOStreams are the streams a command reads and writes. Whether each is a terminal is
// decided once, when the value is made.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	inTTY, outTTY, errTTY bool
	noColor               bool
	width                 int // the terminal's width, when set by SetTerminalWidth
}

// System returns the process's streams.
func System() *IOStreams {
	tty := func(f *os.File) bool { return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()) }
	_, noColor := os.LookupEnv("NO_COLOR")
	s := &IOStreams{
		In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr,
		inTTY: tty(os.Stdin), outTTY: tty(os.Stdout), errTTY: tty(os.Stderr),
		noColor: noColor || os.Getenv("TERM") == "dumb",
	}
	// EVTCTL_FORCE_TTY: any value but "" or "0" makes stdout a terminal whatever it is, and
	// a number above 1 is also its width.
	if force := os.Getenv("EVTCTL_FORCE_TTY"); force != "" && force != "0" {
		s.SetTTY(s.inTTY, true, s.errTTY)
		if w, err := strconv.Atoi(force); err == nil && w > 1 {
			s.SetTerminalWidth(w)
		}
	}
	return s
}

// IsStdinTTY reports whether standard input is a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.inTTY }

// IsStdoutTTY reports whether standard output is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.outTTY }

// IsStderrTTY reports whether standard error is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.errTTY }

// SetTTY overrides terminal detection.
func (s *IOStreams) SetTTY(in, out, errOut bool) { s.inTTY, s.outTTY, s.errTTY = in, out, errOut }

// ColorEnabled reports whether output to stdout may use colour: a terminal, and NO_COLOR unset.
func (s *IOStreams) ColorEnabled() bool { return s.outTTY && !s.noColor }

// TerminalWidth returns the width in columns of the terminal stdout writes to: what the
// terminal reports, else $COLUMNS, else 80. It is asked anew on each call, so a resized
// window is seen. When stdout is not a terminal it returns 0.
func (s *IOStreams) TerminalWidth() int {
	switch {
	case !s.outTTY:
		return 0
	case s.width > 0:
		return s.width
	}
	if f, ok := s.Out.(*os.File); ok {
		if w, _, err := term.GetSize(f.Fd()); err == nil && w > 0 {
			return w
		}
	}
	if w, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && w > 0 {
		return w
	}
	return 80
}

// SetTerminalWidth fixes the width TerminalWidth reports while stdout is a terminal.
func (s *IOStreams) SetTerminalWidth(w int) { s.width = w }
