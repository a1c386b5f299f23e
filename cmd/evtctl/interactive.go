package main

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/tui"
	"github.com/evtctl/evtctl/pkg/client"
)

// interactiveOptions are the flags of tail and replay that open the terminal UI.
type interactiveOptions struct {
	Interactive bool
	Keep        int
}

func (o *interactiveOptions) addFlags(f *pflag.FlagSet) {
	f.BoolVarP(&o.Interactive, "interactive", "i", false, "browse the events in a full-screen terminal UI (the same as -o tui)")
	f.IntVar(&o.Keep, "keep", tui.DefaultKeep, "with -i: events the UI keeps in memory; others are fetched again when scrolled to")
}

// on reports whether the UI is asked for: -i, or -o tui.
func (o *interactiveOptions) on(out *outputOptions) bool {
	return o.Interactive || out.Format == "tui"
}

// check refuses flags that shape output, which the UI does not write.
func (o *interactiveOptions) check(out *outputOptions, others ...flagInUse) error {
	if out.Format != "" && out.Format != "tui" {
		return usagef("-i shows events in the terminal UI; it does not go with -o %s", out.Format)
	}
	others = append(others, flagInUse{out.Template != "", "--template"}, flagInUse{len(out.Fields) > 0, "--fields"})
	for _, f := range others {
		if f.set {
			return usagef("%s does not go with -i (the terminal UI)", f.name)
		}
	}
	if o.Keep != 0 && o.Keep < 100 { // 0: a caller that set no flags, the default
		return usagef("--keep must be at least 100, got %d", o.Keep)
	}
	return nil
}

type flagInUse struct {
	set  bool
	name string
}

// runTailInteractive is tail -i: the UI follows the head, opening at the head or where
// --after, --since or --from-start say.
func runTailInteractive(ctx context.Context, opts *tailOptions) error {
	err := opts.ui.check(&opts.output,
		flagInUse{opts.Count != 0, "--count"}, flagInUse{opts.start.Checkpoint != "", "--checkpoint"},
		flagInUse{opts.UntilCaughtUp, "--until-caught-up"}, flagInUse{opts.IdleTimeout != 0, "--idle-timeout"})
	if err != nil {
		return err
	}
	defer opts.node.holdNotes(opts.streams)()
	query, from, c, err := opts.resolve(ctx)
	if err != nil {
		return opts.node.explain(err)
	}
	return opts.node.explain(runInteractive(ctx, opts.streams, c, interactiveConfig{
		Query: query, Follow: true, From: from.Position, FromStart: from.Oldest, Keep: opts.ui.Keep,
		PageSize: opts.PageSize, Wait: opts.Wait, RetryFor: opts.RetryFor,
	}))
}

// runReplayInteractive is replay -i: the UI shows the range, opening at its oldest end
// (its newest with --reverse).
func runReplayInteractive(ctx context.Context, opts *replayOptions) error {
	if err := opts.ui.check(&opts.output, flagInUse{opts.Count != 0, opts.countFlag}); err != nil {
		return err
	}
	defer opts.node.holdNotes(opts.streams)()
	query, from, to, c, err := opts.resolve(ctx)
	if err != nil {
		return opts.node.explain(err)
	}
	return opts.node.explain(runInteractive(ctx, opts.streams, c, interactiveConfig{
		Query: query, From: from, To: to, Reverse: opts.Reverse, Keep: opts.ui.Keep,
		PageSize: opts.PageSize, RetryFor: opts.RetryFor,
	}))
}

// interactiveConfig says what the terminal UI shows. The zero value follows the head of
// the whole log.
type interactiveConfig struct {
	Query string // the filter query in force at the start; the user may edit it

	// Follow follows the head, as tail does. Without it the UI shows the range From..To
	// and waits for nothing, as replay does.
	Follow bool
	// Following: open at From (exclusive) or, with FromStart, at the oldest event, rather
	// than at the head. A range: its start (exclusive; zero: the log's oldest event).
	From      client.Position
	FromStart bool
	To        client.Position // a range's end, inclusive; zero: the head when the UI starts
	Reverse   bool            // a range: open at its newest end

	Keep     int           // events held in memory; 0: tui.DefaultKeep
	PageSize int           // events per request; 0: the UI's default
	Wait     time.Duration // long-poll wait while following; 0: 25s
	RetryFor time.Duration // stop retrying a failing node after this long; 0: never

	Notes   []string // lines at the top of the UI's help screen
	Message string   // shown above the status bar until a key is pressed
}

// runInteractive runs the full-screen terminal UI on the node c talks to, until the user
// quits (q or ctrl-c: nil) or ctx ends (ctx's error). Any command may call it.
//
// The UI draws on stdout when it is a terminal, else on stderr when that is one, so that
// stdout can stay piped; keys come from stdin, or from the controlling terminal when stdin
// is redirected. Without a terminal it returns a usage error that says so. The terminal is
// restored however the UI ends. A failure that stopped the UI's connection for good (a
// refused token, a query the node rejects) is returned once the terminal is back.
func runInteractive(ctx context.Context, streams *iostreams.IOStreams, c *client.Client, cfg interactiveConfig) error {
	out, color := uiOutput(streams)
	if out == nil {
		return usagef("-i (the terminal UI) needs a terminal, and neither stdout nor stderr is one; use -o jsonl or -o pretty to write events instead")
	}
	in := streams.In
	if !streams.IsStdinTTY() {
		tty, err := openTTY()
		if err != nil {
			return usagef("-i (the terminal UI) needs a terminal to read keys from: stdin is not one, and %v", err)
		}
		defer tty.Close()
		in = tty
	}
	if cfg.Wait <= 0 {
		cfg.Wait = 25 * time.Second
	}
	src := tui.NewClientSource(c, tui.ClientOptions{
		PageSize: max(cfg.PageSize, 100), Wait: cfg.Wait, Backoff: client.Backoff{GiveUp: cfg.RetryFor},
	})
	m := tui.New(tui.Config{
		Source: src, Query: cfg.Query, Follow: cfg.Follow,
		From: cfg.From, FromStart: cfg.FromStart, To: cfg.To, Reverse: cfg.Reverse,
		Keep: cfg.Keep, PageSize: cfg.PageSize, Backoff: client.Backoff{GiveUp: cfg.RetryFor},
		Notes: cfg.Notes, Message: cfg.Message,
		NoColor: !color, Clipboard: out,
	})
	defer m.Close()
	// Frames at up to 120 a second put a key's effect on the screen within about 8 ms; the
	// stream's updates are capped at 30 a second by the model, whatever the event rate.
	// The model asks for the alternate screen in its view.
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithFPS(120)}
	if !color {
		// The model draws no colour then; nothing is left for Bubble Tea to detect.
		opts = append(opts, tea.WithColorProfile(colorprofile.NoTTY))
	}
	p := tea.NewProgram(m, opts...)
	_, err := p.Run()
	m.Close()
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, tea.ErrInterrupted):
		return &statusError{exitInterrupted, errors.New("")} // SIGINT without a raw terminal
	case err != nil:
		return err
	}
	return m.Err()
}

// uiOutput picks the terminal to draw on, and whether colour may be used there.
func uiOutput(s *iostreams.IOStreams) (*os.File, bool) {
	_, noColor := os.LookupEnv("NO_COLOR")
	noColor = noColor || os.Getenv("TERM") == "dumb"
	if f, ok := s.Out.(*os.File); ok && s.IsStdoutTTY() {
		return f, s.ColorEnabled()
	}
	if f, ok := s.ErrOut.(*os.File); ok && s.IsStderrTTY() {
		return f, !noColor
	}
	return nil, false
}

// openTTY opens the controlling terminal for reading keys.
func openTTY() (io.ReadCloser, error) {
	name := "/dev/tty"
	if runtime.GOOS == "windows" {
		name = "CONIN$"
	}
	return os.Open(name)
}
