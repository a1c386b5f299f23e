package main

import (
	"context"
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
func startCheckpoint(so client.StreamOptions, node, query string) cursor.Checkpoint {
	cp := cursor.Checkpoint{Cursor: so.After, Node: node, Query: query, Updated: time.Now().UTC()}
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
