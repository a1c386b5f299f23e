package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/evtctl/evtctl/internal/iostreams"
	"github.com/evtctl/evtctl/internal/timespec"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// startOptions are the flags that say where tail, replay and forward start reading, and
// where replay stops: declared, checked and read here, once, each command taking the ones
// that make sense for it (see addFlags).
type startOptions struct {
	After      string // tail --after: a cursor or @CHECKPOINT_FILE
	From       string // replay and forward --from: a position
	Since      string // tail and replay --since: a time or a duration back
	FromStart  bool   // tail --from-start
	To         string // replay --to: a position, inclusive
	Checkpoint string // tail and forward --checkpoint FILE

	cmd    string   // the command that took the flags
	starts []string // its flags that choose the start, for messages
}

// sinceUsage is --since's help, on every command that takes it.
const sinceUsage = "start at this time: a duration back from now (10m, 2d) or a time (RFC 3339, or local: '2026-11-27 14:00', 14:00)"

// addFlags declares the start flags of cmd: tail, replay or forward.
func (o *startOptions) addFlags(f *pflag.FlagSet, cmd string) {
	o.cmd = cmd
	switch cmd {
	case "tail":
		f.StringVar(&o.After, "after", "", "start after this cursor, or after the one in a checkpoint file: CURSOR or @CHECKPOINT_FILE")
		f.StringVar(&o.Since, "since", "", sinceUsage)
		f.BoolVar(&o.FromStart, "from-start", false, "start at the oldest event the node holds")
		f.StringVar(&o.Checkpoint, "checkpoint", "", "resume from the cursor in FILE when it exists, and keep it updated")
		o.starts = []string{"--after", "--since", "--from-start"}
	case "replay":
		f.StringVar(&o.From, "from", "", "start after this point: CURSOR, @CHECKPOINT_FILE, TIME or DURATION (default: the oldest event)")
		f.StringVar(&o.To, "to", "", "end at this point, inclusive: CURSOR, @CHECKPOINT_FILE, TIME or DURATION (default: the head)")
		f.StringVar(&o.Since, "since", "", sinceUsage)
		o.starts = []string{"--from", "--since"}
	case "forward":
		f.StringVar(&o.From, "from", "", "where to start without a checkpoint: start (the oldest event), a cursor, @CHECKPOINT_FILE, a time or a duration back (default: the head, only new events)")
		f.StringVar(&o.Checkpoint, "checkpoint", "", "resume from the cursor in FILE and keep it updated (default DIR/checkpoint with --state)")
		o.starts = []string{"--from"}
	default:
		panic("start flags for an unknown command " + cmd)
	}
}

// position is where reading starts, or where a range ends: after a cursor, at a time, or
// (Oldest) at the oldest event the log holds. The zero value is the command's default: the
// head for tail and forward, the oldest event for replay's start, the head for its end.
type position struct {
	client.Position
	Oldest bool

	file string          // the checkpoint file it was read from (@FILE), if any
	log  json.RawMessage // the log that checkpoint names, if it names one
}

// startStream starts so at p.
func (p position) startStream(so *client.StreamOptions) {
	so.After, so.Since, so.FromStart = p.Cursor, p.Time, p.Oldest
}

// resolve reads the start flags into where reading starts and (replay) ends, and makes a
// client of the node. A mistake is a usage error, found before the node is asked anything.
// A checkpoint file given as @FILE that names its log is refused against another log with
// exit status 4, as --checkpoint's is: only then is the node asked (within b).
func (o *startOptions) resolve(ctx context.Context, node *nodeOptions, s *iostreams.IOStreams, b client.Backoff) (from, to position, c *client.Client, err error) {
	if from, to, err = o.parse(); err != nil {
		return
	}
	if c, err = node.client(s); err != nil {
		return
	}
	for _, p := range []position{from, to} {
		if err = checkLog(ctx, c, p.file, p.log, b, retryReporter(s)); err != nil {
			return
		}
	}
	return
}

// parse reads the start flags without asking the node anything.
func (o *startOptions) parse() (from, to position, err error) {
	if countSet(o.After != "", o.From != "", o.Since != "", o.FromStart) > 1 {
		return from, to, usagef("%s choose the same thing: give one", andList(o.starts))
	}
	now := time.Now()
	switch {
	case o.After != "":
		from, err = parsePosition("--after", o.After, now, posCursor|posFile)
	case o.From != "":
		forms := posCursor | posFile | posTime
		if o.cmd == "forward" {
			forms |= posStart
		}
		from, err = parsePosition("--from", o.From, now, forms)
	case o.Since != "":
		from.Time, err = parseSince(o.Since, now)
	case o.FromStart:
		from.Oldest = true
	}
	if err != nil || o.To == "" {
		return from, to, err
	}
	if to, err = parsePosition("--to", o.To, now, posCursor|posFile|posTime); err == nil && to.Oldest {
		// As a start it is the log's start; as an end it would read as open (the head).
		err = usagef("--to: checkpoint %s is at the log's start, before every event: no range ends there", to.file)
	}
	return from, to, err
}

func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// posForms are the forms a position flag takes.
type posForms int

const (
	posCursor posForms = 1 << iota // a cursor of the log
	posFile                        // @FILE: the position a checkpoint file holds
	posTime                        // a time, or a duration back from now
	posStart                       // start (or oldest): the oldest event
)

// timeForms names the times and durations taken, for messages.
const timeForms = "a duration back from now (10m, 2h30m) or an RFC 3339 time (2026-11-22T10:00:00Z); " +
	"a duration may count days (2d), and a time may be local: a date and time (2026-11-27 14:00) or a time of day, today (14:00)"

// parsePosition reads a position flag's value, in one of the forms given.
func parsePosition(flag, s string, now time.Time, forms posForms) (position, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return position{}, nil
	case forms&posStart != 0 && (s == "start" || s == "oldest"):
		return position{Oldest: true}, nil
	case forms&posFile != 0 && strings.HasPrefix(s, "@"):
		path := s[1:]
		cp, ok, err := readCheckpoint(path)
		if err != nil {
			return position{}, usagef("%s: %v", flag, err)
		}
		if !ok {
			return position{}, usagef("%s: checkpoint file %s does not exist", flag, path)
		}
		return position{Position: client.Position{Cursor: cp.Cursor, Time: cp.Since}, Oldest: cp.AtStart(), file: path, log: cp.Log}, nil
	case forms&posCursor != 0 && client.IsCursor(s):
		return position{Position: client.Position{Cursor: s}}, nil
	}
	if forms&posTime != 0 {
		if t, err := timespec.Parse(s, now); err == nil {
			return position{Position: client.Position{Time: t}}, nil
		}
	}
	var want []string
	if forms&posStart != 0 {
		want = append(want, "start")
	}
	want = append(want, "a cursor")
	if forms&posFile != 0 {
		want = append(want, "@CHECKPOINT_FILE")
	}
	if forms&posTime == 0 {
		return position{}, usagef("%s %q: want %s; a time goes to --since", flag, s, orList(want))
	}
	return position{}, usagef("%s %q: want %s, %s", flag, s, strings.Join(want, ", "), timeForms)
}

// parseSince reads --since: a time, or a duration back from now.
func parseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := timespec.Parse(s, now); err == nil {
		return t, nil
	}
	if client.IsCursor(s) || strings.HasPrefix(s, "@") {
		return time.Time{}, usagef("--since %q: --since takes a duration or a time; a cursor or checkpoint goes to --after (tail) or --from (replay)", s)
	}
	return time.Time{}, usagef("--since %q: want %s", s, timeForms)
}

// A consumer that keeps a checkpoint (tail --checkpoint, forward) records where it starts
// before it reads anything, so that a run stopped before its first event (a quiet log, a
// filter that has matched nothing yet, --idle-timeout, Ctrl-C) loses nothing: the next run
// starts at the same place and delivers what arrived in between.

// fixHead makes a start at the head concrete: the cursor of the log's newest item, or the
// log's start when it has never held one (everything appended from now on is new). Other
// starts (a cursor, a time, the log's start) are left as they are.
func fixHead(ctx context.Context, c *client.Client, so *client.StreamOptions) error {
	if so.After != "" || !so.Since.IsZero() || so.FromStart {
		return nil
	}
	head, err := c.Head(ctx, so.Backoff, so.OnRetry)
	if err != nil {
		return err
	}
	if head == "" {
		so.FromStart = true
	} else {
		so.After = head
	}
	return nil
}

// startCheckpoint is the checkpoint of a consumer that starts as so says and has read
// nothing yet.
func startCheckpoint(so client.StreamOptions, node, query string, log *logNamer) cursor.Checkpoint {
	cp := cursor.Checkpoint{Cursor: so.After, Node: node, Query: query, Log: log.at(so.After), Updated: time.Now().UTC()}
	if so.After == "" && !so.FromStart {
		cp.Since = so.Since.UTC()
	}
	return cp
}

// resumeAt starts so where the checkpoint cp says.
func resumeAt(so *client.StreamOptions, cp cursor.Checkpoint) {
	so.After, so.Since, so.FromStart = cp.Cursor, cp.Since, cp.AtStart()
}

// describeCheckpoint names the position a checkpoint holds, for messages.
func describeCheckpoint(cp cursor.Checkpoint) string {
	switch {
	case cp.Cursor != "":
		return cp.Cursor
	case !cp.Since.IsZero():
		return "(events since " + cp.Since.Format(time.RFC3339Nano) + ")"
	}
	return "(the log's start)"
}

// loadCheckpoint reads the checkpoint file at path for a consumer of the log c reads: its
// cursor must be a cursor, and a checkpoint that names its log (a chain) is refused against
// another log, with exit status 4. ok is false when the file does not exist.
func loadCheckpoint(ctx context.Context, c *client.Client, path string, b client.Backoff, onRetry client.RetryFunc) (cp cursor.Checkpoint, ok bool, err error) {
	if cp, ok, err = readCheckpoint(path); err != nil || !ok {
		return cp, ok, err
	}
	if err := checkLog(ctx, c, path, cp.Log, b, onRetry); err != nil {
		return cp, false, err
	}
	return cp, true, nil
}

// readCheckpoint reads the checkpoint file at path, whose cursor must be a cursor, without
// asking the node anything. ok is false when the file does not exist.
func readCheckpoint(path string) (cp cursor.Checkpoint, ok bool, err error) {
	if cp, ok, err = cursor.LoadCheckpoint(path); err != nil || !ok {
		return cp, ok, err
	}
	if cp.Cursor != "" && !client.IsCursor(cp.Cursor) {
		return cp, false, fmt.Errorf("checkpoint %s: %q is not a cursor", path, cp.Cursor)
	}
	return cp, true, nil
}

// checkLog refuses, with exit status 4, the checkpoint at path when the log it names (log;
// nil for none) is not the one c reads.
func checkLog(ctx context.Context, c *client.Client, path string, log json.RawMessage, b client.Backoff, onRetry client.RetryFunc) error {
	if len(log) == 0 {
		return nil
	}
	// What the node is must be known before its log can be told from another.
	if _, err := c.Head(ctx, b, onRetry); err != nil {
		return err
	}
	if err := c.CheckIdentity(ctx, log); err != nil {
		return &statusError{exitNotOfLog, fmt.Errorf("checkpoint %s is not of this log: %w", path, err)}
	}
	return nil
}

// logNamer names the log at positions for checkpoints (see client.Identity). It keeps the
// last name it learnt: a checkpoint written while the source cannot say (a node that does
// not answer, Ctrl-C) is written with it, which still tells another log from this one.
type logNamer struct {
	ctx  context.Context
	c    *client.Client
	last json.RawMessage
}

func newLogNamer(ctx context.Context, c *client.Client, saved json.RawMessage) *logNamer {
	return &logNamer{ctx: context.WithoutCancel(ctx), c: c, last: saved}
}

// at is the log's name at pos, or the last one learnt.
func (n *logNamer) at(pos string) json.RawMessage {
	if n == nil {
		return nil
	}
	if pos != "" {
		ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
		defer cancel()
		if id, err := n.c.Identity(ctx, pos); err == nil && len(id) > 0 {
			n.last = id
		}
	}
	return n.last
}

// nodeMoved warns that a checkpoint written against one node is resumed against another,
// whose log it may not be of — unless it names its log, which was checked (a chain's
// checkpoint resumes on any node of the chain).
func nodeMoved(s *iostreams.IOStreams, path string, cp cursor.Checkpoint, node string) {
	if cp.Node != "" && cp.Node != node && len(cp.Log) == 0 {
		fmt.Fprintf(s.ErrOut, "evtctl: warning: checkpoint %s was written for %s, not %s; its cursor may not belong to this node's log\n", path, safeText(cp.Node), node)
	}
}
