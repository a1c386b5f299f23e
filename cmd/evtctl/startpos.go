package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
)

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
	if cp, ok, err = cursor.LoadCheckpoint(path); err != nil || !ok {
		return cp, ok, err
	}
	if cp.Cursor != "" && !client.IsCursor(cp.Cursor) {
		return cp, false, fmt.Errorf("checkpoint %s: %q is not a cursor", path, cp.Cursor)
	}
	if cp.Cursor != "" {
		if err := c.CheckPosition(cp.Cursor); err != nil {
			return cp, false, &statusError{exitNotOfLog, fmt.Errorf("checkpoint %s is not of this log: %w", path, err)}
		}
	}
	if len(cp.Log) > 0 {
		// What the node is must be known before its log can be told from another.
		if _, err := c.Head(ctx, b, onRetry); err != nil {
			return cp, false, err
		}
		if err := c.CheckIdentity(ctx, cp.Log); err != nil {
			return cp, false, &statusError{exitNotOfLog, fmt.Errorf("checkpoint %s is not of this log: %w", path, err)}
		}
	}
	return cp, true, nil
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
