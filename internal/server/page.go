package server

import (
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Two budgets bound what one request costs the node:
//
//   - Its reply: the calls of a JSON-RPC batch share MaxReplyBytes. A page that would go past
//     what is left of it is cut short and says more:true, so that a client goes on from its last
//     item; a call that finds the budget spent answers no items and more:true.
//   - The work of its filter: its reads (the calls of a batch, the reads of a long-poll) examine
//     records until the filter has looked at ScanBudget bytes of events, each record's bytes
//     counted once for every pass the filter makes over them (filter.Query.Work). A read that
//     stops on the budget says more:true and where to resume (Page.Resume, sent as "resume").

// replyTrailer is room for what follows a page's items: more, oldest, newest, resume and order.
const replyTrailer = 256

// minItemBytes is less than any item takes encoded.
const minItemBytes = 64

// The result object of a call as the page writer encodes it, by hand, in the names of
// package wire:
//
//	{"items":[{"cursor":"C","event":"TYPE","data":JSON},…],"more":B,"oldest":"C","newest":"C"[,"resume":"C"][,"order":"asc"]}
//
// An item is encoded the same way in a stream's lines.
const (
	replyItems  = `{"` + wire.KeyItems + `":[`
	itemCursor  = `{"` + wire.KeyCursor + `":"`
	itemEvent   = `","` + wire.KeyEvent + `":`
	itemData    = `,"` + wire.KeyData + `":`
	replyMore   = `],"` + wire.KeyMore + `":`
	replyOldest = `,"` + wire.KeyOldest + `":"`
	replyNewest = `","` + wire.KeyNewest + `":"`
	replyResume = `,"` + wire.KeyResume + `":"`
	replyAsc    = `,"` + wire.KeyOrder + `":"` + wire.OrderAsc + `"`
)

// pageEnd is what a result says after its items.
type pageEnd struct {
	more           bool
	oldest, newest cursor.Cursor
	resume         cursor.Cursor // where the read stopped short, or zero
	ascending      bool
}

// pageWriter encodes the result object of one call. It writes items while they fit in its
// limit, then the rest of the object.
type pageWriter struct {
	b     []byte
	n     int  // items written
	limit int  // most bytes the result may take, its end included
	force bool // the first item is written even when it alone is larger than limit
	cut   bool // an item was left out for want of room
}

func newPageWriter(buf []byte, limit int, force bool) pageWriter {
	return pageWriter{b: append(buf, replyItems...), limit: limit, force: force}
}

// grow makes room for n more bytes, so that writing them does not copy what is written.
func (pw *pageWriter) grow(n int) {
	if cap(pw.b)-len(pw.b) >= n {
		return
	}
	b := append(getPageBuf(len(pw.b)+n), pw.b...)
	putPageBuf(pw.b)
	pw.b = b
}

// room is how many bytes of items still fit.
func (pw *pageWriter) room() int { return max(pw.limit-len(pw.b)-replyTrailer, 0) }

// add writes the items that fit, in order, and reports how many it wrote.
func (pw *pageWriter) add(items []eventlog.Item) int {
	for i, it := range items {
		if pw.cut {
			return i
		}
		mark := len(pw.b)
		if pw.n > 0 {
			pw.b = append(pw.b, ',')
		}
		pw.b = append(pw.b, itemCursor...)
		pw.b = it.Cursor.Append(pw.b)
		pw.b = append(pw.b, itemEvent...)
		pw.b = appendJSONString(pw.b, it.Type)
		pw.b = append(pw.b, itemData...)
		pw.b = append(pw.b, it.JSON...)
		pw.b = append(pw.b, '}')
		if len(pw.b)+replyTrailer > pw.limit && !(pw.force && pw.n == 0) {
			pw.b = pw.b[:mark]
			pw.cut = true
			return i
		}
		pw.n++
	}
	return len(items)
}

// finish writes the end of the result object and returns it.
func (pw *pageWriter) finish(e pageEnd) []byte {
	b := append(pw.b, replyMore...)
	b = strconv.AppendBool(b, e.more)
	b = append(b, replyOldest...)
	b = e.oldest.Append(b)
	b = append(b, replyNewest...)
	b = e.newest.Append(b)
	b = append(b, '"')
	if !e.resume.IsZero() {
		b = append(b, replyResume...)
		b = e.resume.Append(b)
		b = append(b, '"')
	}
	if e.ascending {
		b = append(b, replyAsc...)
	}
	pw.b = append(b, '}')
	return pw.b
}

// Page buffers are reused: a replay moves thousands of pages of up to megabytes, and
// allocating each anew made garbage collection a large share of the node's work.
var pageBufs sync.Pool // of *[]byte

func getPageBuf(n int) []byte {
	if p, ok := pageBufs.Get().(*[]byte); ok && cap(*p) >= n {
		return (*p)[:0]
	}
	return make([]byte, 0, n)
}

// putPageBuf returns a page to the pool once the reply holding it has been written.
func putPageBuf(b []byte) {
	if b != nil && cap(b) <= 16<<20 {
		b = b[:0]
		pageBufs.Put(&b)
	}
}

// pageSize is room enough for a page encoded, so that it is not copied as it grows.
func pageSize(p eventlog.Page) int {
	n := replyTrailer + 16
	for _, it := range p.Items {
		// {"cursor":"<33>","event":"<type>","data":<json>}, a comma, and room for escapes.
		n += len(it.JSON) + len(it.Type) + 96
	}
	return n
}

func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// scanCount wraps a read's filter to count the work it does. A read in the scan lane
// (yield) lets other goroutines run every yieldWork of it, so that a costly scan that holds
// a CPU does not hold up the cheap requests waiting for one.
type scanCount struct {
	match func([]byte) bool
	work  int64 // per byte of an event
	yield bool
	used  atomic.Int64
}

// yieldWork is how much work a read in the scan lane does between two yields: about a
// millisecond of the costliest filter.
const yieldWork = quickWork / 16

func (c *scanCount) matchJSON(event []byte) bool {
	n := int64(len(event)) * c.work
	if used := c.used.Add(n); c.yield && used/yieldWork != (used-n)/yieldWork {
		runtime.Gosched()
	}
	return c.match(event)
}

// readInto reads what q asks into pw, within pw's room and the scan budget, and returns what
// the result says after its items. It holds a read slot for the whole of it (lanes.go):
// waiting readers hold none, but a page being read holds up to q.Max events in memory, so
// only MaxReads (and MaxScans) are built at once; the others queue (until their request
// ends).
//
// A read goes in steps, each starting where the last stopped. A step asks for no more items
// than the reply has room for if each were as large as the largest item seen by the last step
// that saw any (this read's, or before it another read's; as large as an event may be at
// first), so that the items a step holds in memory take about the room left rather than a
// page of the largest events, and a page of small events is read in one step. A filtered step is
// given as many records as the scan budget left pays for if every record were as large as an
// event may be, and its actual work is counted: a filter that is costly per byte is stopped
// after few records, and a cheap one on small events examines many.
func (s *Server) readInto(ctx context.Context, q eventlog.Query, work int, scan *int64, pw *pageWriter) (pageEnd, error) {
	slot := readSlot{s: s}
	if err := slot.take(ctx, q.Match != nil, s.cfg.ScanBudget-*scan); err != nil {
		return pageEnd{}, err
	}
	defer slot.release()
	end := pageEnd{ascending: q.Ascending}
	left := *scan
	defer func() { *scan = left }()
	perRecord := int64(max(work, 1)) * int64(s.cfg.MaxEventSize)
	if (pw.room() < minItemBytes && !pw.force) || (q.Match != nil && left < perRecord && left < s.cfg.ScanBudget) {
		// The reply's budget, or the filter's, was spent by the calls before this one: it
		// answers no items and more:true at once (cut short: a long-poll does not wait), and
		// reads only where the log stands.
		pw.cut = true
		return s.readBounds(ctx, q)
	}
	largest := int(s.largestItem.Load()) // the largest item a step may meet
	if largest == 0 {
		largest = s.cfg.MaxEventSize
	}
	for step := 0; ; step++ {
		sq := q
		sq.Max = min(q.Max-pw.n, 1+pw.room()/max(largest, minItemBytes))
		var count *scanCount
		if q.Match != nil {
			spent := s.cfg.ScanBudget - left
			if err := slot.take(ctx, true, spent); err != nil {
				return pageEnd{}, err
			}
			count = slot.counter(q.Match, work)
			sq.Match = count.matchJSON
			sq.Budget = slot.stepBudget(left, spent, perRecord)
		}
		page, err := s.readLog(ctx, sq)
		if err != nil {
			return pageEnd{}, err
		}
		pw.grow(min(pageSize(page), pw.room()+replyTrailer))
		wrote := pw.add(page.Items)
		if wrote > 0 {
			largest = 0
			for _, it := range page.Items[:wrote] {
				largest = max(largest, len(it.JSON)+len(it.Type)+64)
			}
			s.largestItem.Store(int64(largest))
		}
		var last cursor.Cursor
		if wrote > 0 {
			last = page.Items[wrote-1].Cursor
		}
		full := len(page.Items) == sq.Max
		page.Release()
		if step == 0 || q.Ascending {
			// The head as the step that read the newest items saw it: the first step of a
			// newest-first read, the last of an ascending one.
			end.newest = page.Newest
		}
		if step == 0 {
			end.oldest = page.Oldest
		}
		if count != nil {
			left -= count.used.Load()
		}
		var next cursor.Cursor // where the next step starts
		switch {
		case pw.cut:
			// No room for the rest: the client goes on from the last item written.
			end.more = true
			return end, nil
		case pw.n == q.Max:
			end.more = page.More
			return end, nil
		case page.AtLoss:
			// Stopped at a range lost to damage: the client's next read after Resume is
			// told of the loss; reading on here would hide it.
			end.more, end.resume = true, page.Resume
			return end, nil
		case !page.Resume.IsZero():
			next = page.Resume
		case page.More && full:
			next = last // this step's page was full, the call's is not
		default:
			end.more = page.More
			return end, nil
		}
		if pw.room() == 0 || (q.Match != nil && left < perRecord) || !progressed(q, next) {
			end.more = true
			if !page.Resume.IsZero() {
				end.resume = page.Resume
			}
			return end, nil
		}
		if q.Ascending {
			q.After = next
		} else {
			q.Before = next
		}
	}
}

// readBounds reads where the log stands, for a call that reads no items: a page of none
// that says more:true.
func (s *Server) readBounds(ctx context.Context, q eventlog.Query) (pageEnd, error) {
	q.Match, q.Budget, q.Max = nil, 0, 1
	page, err := s.readLog(ctx, q)
	if err != nil {
		return pageEnd{}, err
	}
	page.Release()
	return pageEnd{more: true, oldest: page.Oldest, newest: page.Newest, ascending: q.Ascending}, nil
}

// progressed reports whether next lies beyond where q starts, so that a read from next
// makes progress.
func progressed(q eventlog.Query, next cursor.Cursor) bool {
	if q.Ascending {
		return q.After.IsZero() || next.After(q.After)
	}
	return q.Before.IsZero() || q.Before.After(next)
}
