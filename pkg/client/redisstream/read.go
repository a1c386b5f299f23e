package redisstream

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// snapshot is what XINFO STREAM said of the stream, in the same transaction as a read.
type snapshot struct {
	exists  bool  // the key exists (a stream that has had entries, or was created empty)
	length  int64 // entries it holds
	added   int64 // entries ever added to it (entries-added)
	lastGen ID    // the newest id it ever gave (last-generated-id)
	maxDel  ID    // the newest id ever deleted by XDEL (max-deleted-entry-id); trimming does not set it
	first   ID    // its oldest entry, when length > 0
	last    ID    // its newest entry, when length > 0
}

// removed is how many entries were trimmed or deleted, ever.
func (s snapshot) removed() int64 { return s.added - s.length }

// head is the stream's newest position: every id it gave is at or before it ("" for a
// stream that never held an entry).
func (s snapshot) head() string {
	if !s.exists || s.lastGen.IsZero() {
		return ""
	}
	return s.lastGen.String()
}

// oldest is its oldest entry ("" when it holds none).
func (s snapshot) oldest() string {
	if s.length == 0 {
		return ""
	}
	return s.first.String()
}

// appendWriter is an io.Writer that appends to a byte slice: a read's reply lands in the
// page's memory.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// rangeArgs are the arguments of a read of up to count entries: after start (exclusive;
// zero and !hasStart: the stream's start) up to end (end: inclusive when endIncl, else
// exclusive; "" the head), oldest first, or newest first (start then bounds from below).
type rangeArgs struct {
	after    ID
	hasAfter bool
	end      ID
	hasEnd   bool
	endIncl  bool
	count    int
	backward bool
}

func (a rangeArgs) cmd(key string) []any {
	lo, hi := "-", "+"
	if a.hasAfter {
		lo = "(" + a.after.String()
	}
	if a.hasEnd {
		hi = a.end.String()
		if !a.endIncl {
			hi = "(" + hi
		}
	}
	if a.backward {
		return []any{"XREVRANGE", key, hi, lo, "COUNT", a.count}
	}
	return []any{"XRANGE", key, lo, hi, "COUNT", a.count}
}

// read reads entries as a says together with the stream's XINFO, in one transaction, so that
// what the counters say is of exactly the entries read. The reply is appended to w; its
// entries to entries, their fields to fields.
func (c *conn) read(ctx context.Context, a rangeArgs, w *appendWriter, entries []rawEntry, fields []field) (snapshot, []rawEntry, []field, error) {
	key := c.addr.Stream
	var info *redis.XInfoStreamCmd
	var rng *redis.RawCmd
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		info = p.XInfoStream(ctx, key)
		rng = redis.NewRawCmd(ctx, a.cmd(key)...)
		return p.Process(ctx, rng)
	})
	if info == nil || rng == nil || err != nil && info.Err() == nil && rng.Err() == nil {
		// The transaction failed as a whole (the connection, or its authentication).
		return snapshot{}, entries, fields, c.failure(ctx, "reading the stream", err)
	}
	snap, serr := c.snapshotOf(ctx, info)
	if serr != nil {
		return snap, entries, fields, serr
	}
	if err := rng.Err(); err != nil {
		return snap, entries, fields, c.failure(ctx, "reading the stream", err)
	}
	if err != nil && !isNoSuchKey(err) {
		return snap, entries, fields, c.failure(ctx, "reading the stream", err)
	}
	c.ok()
	w.b = rng.Val()
	entries, fields, err = readEntries(w.b, entries, fields)
	if err != nil {
		return snap, entries, fields, c.failure(ctx, "reading the stream", err)
	}
	return snap, entries, fields, nil
}

// info reads the stream's XINFO alone.
func (c *conn) info(ctx context.Context) (snapshot, error) {
	return c.snapshotOf(ctx, c.rdb.XInfoStream(ctx, c.addr.Stream))
}

func (c *conn) snapshotOf(ctx context.Context, info *redis.XInfoStreamCmd) (snapshot, error) {
	v, err := info.Result()
	switch {
	case isNoSuchKey(err):
		c.ok()
		return snapshot{}, nil
	case err != nil:
		return snapshot{}, c.failure(ctx, "reading the stream's XINFO", err)
	case v == nil:
		return snapshot{}, c.failure(ctx, "reading the stream's XINFO", errProtocol)
	}
	c.ok()
	s := snapshot{exists: true, length: v.Length, added: v.EntriesAdded}
	var perr error
	parse := func(text string) ID {
		id, err := ParseID(text)
		if err != nil && perr == nil {
			perr = err
		}
		return id
	}
	if v.MaxDeletedEntryID == "" {
		return s, c.serverError("reading the stream's XINFO", "ERR unknown command: XINFO STREAM has no max-deleted-entry-id or entries-added", nil)
	}
	s.lastGen, s.maxDel = parse(v.LastGeneratedID), parse(v.MaxDeletedEntryID)
	if s.length > 0 {
		s.first, s.last = parse(v.FirstEntry.ID), parse(v.LastEntry.ID)
	}
	if perr != nil || s.length < 0 || s.added < s.length {
		return s, c.failure(ctx, "reading the stream's XINFO", errProtocol)
	}
	return s, nil
}

// isNoSuchKey reports XINFO's answer for a key that does not exist.
func isNoSuchKey(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "ERR no such key")
}

// wait blocks until the stream holds an entry after `after` (XREAD BLOCK), for at most d;
// it reports whether one came. It returns at once when ctx ends, leaving the command to
// finish on its own within a few seconds.
func (c *conn) wait(ctx context.Context, after ID, d time.Duration) (bool, error) {
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, nil
		}
		// Blocks of at most 2 s: a command left behind by an ended ctx holds its
		// connection no longer than that.
		block := min(left, 2*time.Second)
		if block < time.Millisecond {
			block = time.Millisecond
		}
		type result struct {
			ok  bool
			err error
		}
		done := make(chan result, 1)
		go func() {
			bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), block+c.rdb.Options().ReadTimeout)
			defer cancel()
			n, err := c.rdb.Do(bctx, "XREAD", "COUNT", 1, "BLOCK", block.Milliseconds(), "STREAMS", c.addr.Stream, after.String()).Result()
			if errors.Is(err, redis.Nil) {
				done <- result{false, nil}
				return
			}
			done <- result{err == nil && n != nil, err}
		}()
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case r := <-done:
			if r.err != nil {
				return false, c.failure(ctx, "waiting for new entries", r.err)
			}
			c.ok()
			if r.ok {
				return true, nil
			}
		}
	}
}

// formatCount is n for a message: "1 entry", "40 entries".
func formatCount(n int64) string {
	if n == 1 {
		return "1 entry"
	}
	return strconv.FormatInt(n, 10) + " entries"
}
