package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/wire"
)

// An evtctl node's stream (wire.PathStream): one long response of JSON lines for a range,
// which the client reads instead of paging when the node advertises it.
const (
	// streamIdle is how long a stream may send nothing before the client gives up on it
	// and resumes.
	streamIdle = 45 * time.Second
	// streamChunk is the size of the buffers a stream is read into: each becomes one
	// delivery of items.
	streamChunk = 1 << 20
	// streamMaxLine bounds one line: an item holds an event of at most 64 KiB in JSON format
	// and its type (as long, at worst), escaped.
	streamMaxLine = 1 << 20
)

// errNoStream: the node does not serve its stream after all; the range is paged instead.
var errNoStream = errors.New("the node does not serve its stream")

// errCutOff is a stream that ended without its last line.
var errCutOff = errors.New("the node's stream was cut off")

// streamEnd is what the last line of a stream says.
type streamEnd struct {
	more           bool
	resume, newest string
}

// streamPart is one buffer of a stream, read and split into items.
type streamPart struct {
	buf   *streamBuf
	items []Item
	end   *streamEnd // the last line, when this part holds it
	err   error
}

// streamBuf is a read buffer and the items that alias it, reused together.
type streamBuf struct {
	b     []byte
	items []Item
}

var streamBufs sync.Pool // of *streamBuf

// fatal is an error of the caller's (its function failed, or the limit was reached): the
// stream is not retried.
type fatal struct{ err error }

func (f *fatal) Error() string { return f.err.Error() }
func (f *fatal) Unwrap() error { return f.err }

// streamRange reads a chronological range through an evtctl node's stream, when it
// advertises one; errNoStream otherwise.
func (s *eventsSource) streamRange(ctx context.Context, w *rangeWalk) error {
	p := s.n.stream.Load()
	if p == nil || s.n.Kind() != KindEvtctl {
		return errNoStream
	}
	before, err := s.through(w.end)
	if err != nil {
		return err
	}
	return w.walkStream(ctx, s.n, *p, before)
}

// walkStream walks the range [w.after, before) through the node's stream at path, retrying
// as Page's callers do and resuming after the last item delivered. errNoStream means the
// node refused the stream before anything was delivered.
func (w *rangeWalk) walkStream(ctx context.Context, n *rpcNode, path, before string) error {
	after := w.after
	first := true // no stream has begun yet: a gap is reported from the range's start
	var failingSince time.Time
	attempt := 0
	for {
		was := after
		opened, end, err := w.streamOnce(ctx, n, path, after, before, first, &after)
		if opened {
			first = false
		}
		if err == nil {
			if !end.more {
				return nil
			}
			// The node stopped where the next stream goes on: at damage in its log (the next
			// stream starts past it, saying what was lost), or after a step of work. Went on
			// unless this stream brought nothing: a node shutting down is asked again later.
			if next := cursor.Later(after, end.resume); next != was {
				after = strings.Clone(next)
				attempt, failingSince = 0, time.Time{}
				continue
			}
			err = fmt.Errorf("the node stopped its stream after %s", after)
		}
		var f *fatal
		switch {
		case errors.As(err, &f):
			return f.err
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, errNoStream):
			if first {
				return errNoStream
			}
			return err
		case !Retryable(err):
			return err
		}
		if opened {
			attempt, failingSince = 0, time.Time{} // it served; this is a new failure
		}
		d := max(w.opts.Backoff.delay(attempt), retryAfterOf(err))
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if g := w.opts.Backoff.GiveUp; g > 0 && time.Since(failingSince)+d > g {
			return fmt.Errorf("%w (gave up after retrying for %s)", err, time.Since(failingSince).Round(time.Second))
		}
		attempt++
		if w.opts.OnRetry != nil {
			w.opts.OnRetry(err, attempt, d)
		}
		if err := retry.Sleep(ctx, d); err != nil {
			return err
		}
	}
}

// streamOnce reads one stream of the range after `after`, delivering its items and moving
// *last past each part delivered. opened reports that the node began the stream (and the
// gap from its start was checked); end is its last line when err is nil.
func (w *rangeWalk) streamOnce(ctx context.Context, c *rpcNode, path, after, before string, first bool, last *string) (opened bool, end *streamEnd, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v := url.Values{}
	if after != "" {
		v.Set(wire.ParamAfter, after)
	}
	if before != "" {
		v.Set(wire.ParamBefore, before)
	}
	if w.opts.Query != "" {
		v.Set(wire.ParamQuery, w.opts.Query)
	}
	u := strings.TrimSuffix(c.endpoint, "/") + path + "?" + v.Encode()
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, nil, err
	}
	hr.Header.Set("Accept", wire.MediaNDJSON)
	hr.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	idle := time.AfterFunc(streamIdle, cancel)
	defer idle.Stop()
	resp, err := c.hc.Do(hr)
	if err != nil {
		return false, nil, transportError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		switch resp.StatusCode {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
			return false, nil, errNoStream
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if re := rpcErrorOf(data); re != nil && resp.StatusCode == http.StatusBadRequest {
			return false, nil, re // refused as the events method refuses it
		}
		_, err := decodeReply(resp, data)
		return false, nil, err
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), wire.MediaNDJSON) {
		return false, nil, errNoStream
	}
	from := after
	if first {
		from = w.gapFrom
	}
	// A node that holds nothing after `after` says so with an empty oldest: the stream
	// brings no items then.
	oldest := resp.Header.Get(wire.HeaderOldest)
	if g := GapAfter(from, oldest, resp.Header.Get(wire.HeaderNewest), oldest == ""); g != nil {
		if err := w.gap(g); err != nil {
			return true, nil, &fatal{err}
		}
	}
	parts := make(chan streamPart, 1) // one ready while the next is read
	go readStream(ctx, resp.Body, idle, parts)
	defer func() {
		cancel()
		for p := range parts { // let the reader finish
			w.putBuf(p.buf)
		}
	}()
	for p := range parts {
		if p.err != nil {
			return true, nil, p.err
		}
		items, past := w.withinAscending(p.items)
		for len(items) > 0 {
			n := min(len(items), w.opts.PageSize) // a page's worth at a time, as when paging
			if err := w.deliver(items[:n]); err != nil {
				w.putBuf(p.buf)
				return true, nil, &fatal{err}
			}
			*last = strings.Clone(items[n-1].Cursor)
			items = items[n:]
		}
		w.putBuf(p.buf)
		if past {
			return true, &streamEnd{}, nil
		}
		if p.end != nil {
			return true, p.end, nil
		}
	}
	return true, nil, errCutOff
}

// withinAscending drops the items, oldest first, that lie after the range's end; past
// reports that some did. Only the last needs looking at, unless it lies past the end.
func (w *rangeWalk) withinAscending(items []Item) (kept []Item, past bool) {
	if len(items) == 0 || cursor.CompareText(items[len(items)-1].Cursor, w.end) <= 0 {
		return items, false
	}
	for i, it := range items {
		if cursor.CompareText(it.Cursor, w.end) > 0 {
			return items[:i], true
		}
	}
	return items, false
}

func (w *rangeWalk) putBuf(b *streamBuf) {
	if b != nil && w.opts.ReuseMemory {
		if poisonReleased {
			clear(b.b)
		}
		clear(b.items) // drop references into the buffer
		streamBufs.Put(b)
	}
}

func getStreamBuf(n int) *streamBuf {
	if b, ok := streamBufs.Get().(*streamBuf); ok && cap(b.b) >= n {
		return b
	}
	return &streamBuf{b: make([]byte, 0, n)}
}

// readStream reads a stream's body into buffers, splits each into items and sends them on
// out, which it closes when done. A part holds whole lines only: a line cut by the end of a
// buffer starts the next one.
func readStream(ctx context.Context, body io.Reader, idle *time.Timer, out chan<- streamPart) {
	defer close(out)
	send := func(p streamPart) bool {
		select {
		case out <- p:
			return true
		case <-ctx.Done():
			return false
		}
	}
	var carry []byte // the start of a line the last buffer cut
	var sc streamScanner
	for {
		buf := getStreamBuf(max(streamChunk, 2*len(carry)))
		b := append(buf.b[:0], carry...)
		n, err := readSome(body, b[len(b):cap(b)], idle)
		b = b[:len(b)+n]
		buf.b = b
		cut := bytes.LastIndexByte(b, '\n')
		if cut < 0 {
			switch {
			case err == io.EOF:
				send(streamPart{err: errCutOff})
				return
			case err != nil:
				send(streamPart{err: transportError(ctx, err)})
				return
			case len(b) > streamMaxLine:
				send(streamPart{err: &DecodeError{Err: errors.New("a line of the stream is too long"), Body: prefix(b, 80)}})
				return
			}
			carry = append(carry[:0], b...)
			continue
		}
		carry = append(carry[:0], b[cut+1:]...)
		items, end, perr := sc.parse(b[:cut+1], buf.items[:0])
		buf.items = items
		switch {
		case perr != nil:
			send(streamPart{err: perr})
			return
		case end != nil && len(carry) > 0:
			send(streamPart{err: &DecodeError{Err: errors.New("the stream goes on after its last line"), Body: prefix(carry, 80)}})
			return
		}
		if !send(streamPart{buf: buf, items: items, end: end}) || end != nil {
			return
		}
		if err != nil {
			if err == io.EOF {
				err = errCutOff
			} else {
				err = transportError(ctx, err)
			}
			send(streamPart{err: err})
			return
		}
	}
}

// readSome reads into b until it holds a good part of a buffer, the body ends or fails,
// pushing the idle deadline on with each read.
func readSome(r io.Reader, b []byte, idle *time.Timer) (int, error) {
	want := min(len(b), streamChunk/4)
	n := 0
	for n < want {
		m, err := r.Read(b[n:])
		n += m
		if m > 0 {
			idle.Reset(streamIdle)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// streamScanner splits a stream's lines into items, checking that their cursors ascend.
type streamScanner struct {
	prev    [64]byte
	prevLen int
}

// parse appends the items of lines (whole lines, each ending in a newline) to items. The
// last line of the stream, when among them, is returned as end and must be the last.
func (sc *streamScanner) parse(lines []byte, items []Item) ([]Item, *streamEnd, error) {
	for len(lines) > 0 {
		nl := bytes.IndexByte(lines, '\n')
		line := lines[:nl]
		lines = lines[nl+1:]
		it, ok := parseStreamItem(line)
		if !ok {
			end, ok := parseStreamEnd(line)
			if !ok {
				return items, nil, &DecodeError{Err: errors.New("a line of the stream is neither an item nor its end"), Body: prefix(line, 80)}
			}
			if len(lines) > 0 {
				return items, nil, &DecodeError{Err: errors.New("the stream goes on after its last line"), Body: prefix(lines, 80)}
			}
			return items, end, nil
		}
		if prev := unsafe.String(&sc.prev[0], sc.prevLen); sc.prevLen > 0 && cursor.CompareText(it.Cursor, prev) <= 0 {
			return items, nil, &DecodeError{Err: fmt.Errorf("cursor %s does not follow %s", it.Cursor, prev), Body: prefix(line, 80)}
		}
		sc.prevLen = copy(sc.prev[:], it.Cursor)
		items = append(items, it)
	}
	return items, nil, nil
}

// An item as a node writes it on a line of its stream.
const (
	itemCursor = `{"` + wire.KeyCursor + `":"`
	itemEvent  = `,"` + wire.KeyEvent + `":"`
	itemData   = `,"` + wire.KeyData + `":`
)

// parseStreamItem reads a line that is an item as an evtctl node writes it:
// {"cursor":"C","event":"E","data":D} — a cursor, a JSON string, and a JSON value as the
// rest. Its fields alias line; the value is not checked (the node stored it checked, and
// the renderer compacts what is not compact with a decoder that checks it).
func parseStreamItem(line []byte) (Item, bool) {
	if !bytes.HasPrefix(line, []byte(itemCursor)) {
		return Item{}, false
	}
	rest := line[len(itemCursor):]
	q := bytes.IndexByte(rest, '"')
	if q < 0 || !cursorText(rest[:q]) {
		return Item{}, false
	}
	cur := rest[:q]
	rest = rest[q+1:]
	if !bytes.HasPrefix(rest, []byte(itemEvent)) {
		return Item{}, false
	}
	rest = rest[len(itemEvent)-1:] // from the event's opening quote
	e := stringEnd(rest)
	if e < 0 {
		return Item{}, false
	}
	event := rest[:e]
	rest = rest[e:]
	if !bytes.HasPrefix(rest, []byte(itemData)) {
		return Item{}, false
	}
	data := rest[len(itemData):]
	if len(data) < 2 || data[len(data)-1] != '}' {
		return Item{}, false
	}
	data = data[:len(data)-1]
	return Item{Item: wire.Item{Cursor: unsafe.String(unsafe.SliceData(cur), len(cur)), Event: stringOf(event), Data: data}, Raw: line}, true
}

// cursorText reports whether b is a cursor as nodes write it: 16 hex digits, a dash and 4 to
// 16 more, in lower case.
func cursorText(b []byte) bool {
	if len(b) < 21 || len(b) > 33 || b[16] != '-' {
		return false
	}
	for i, c := range b {
		if i != 16 && !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// stringEnd returns the index just past the JSON string that s starts with, or -1. It
// checks only where the string ends.
func stringEnd(s []byte) int {
	if len(s) == 0 || s[0] != '"' {
		return -1
	}
	i := 1
	for {
		j := bytes.IndexByte(s[i:], '"')
		if j < 0 {
			return -1
		}
		q := i + j
		bs := 0
		for k := q - 1; k >= i && s[k] == '\\'; k-- {
			bs++
		}
		if bs%2 == 0 {
			if bytes.IndexByte(s[1:q], '\n') >= 0 {
				return -1
			}
			return q + 1
		}
		i = q + 1
	}
}

// parseStreamEnd reads the last line of a stream (a wire.StreamEnd):
// {"end":{"more":B,"resume":"C","newest":"C"}}.
func parseStreamEnd(line []byte) (*streamEnd, bool) {
	if !bytes.HasPrefix(line, []byte(`{"`+wire.KeyEnd+`":`)) || !gjson.ValidBytes(line) {
		return nil, false
	}
	e := gjson.GetBytes(line, wire.KeyEnd)
	more := e.Get(wire.KeyMore)
	if !e.IsObject() || !more.IsBool() {
		return nil, false
	}
	end := &streamEnd{more: more.Bool(), resume: e.Get(wire.KeyResume).String(), newest: e.Get(wire.KeyNewest).String()}
	for _, c := range []string{end.resume, end.newest} {
		if c != "" && !cursorText([]byte(c)) {
			return nil, false
		}
	}
	return end, true
}

// rpcErrorOf reads a JSON-RPC error object, as a node refuses a stream's parameters with.
func rpcErrorOf(b []byte) *RPCError {
	if !gjson.ValidBytes(b) {
		return nil
	}
	code, msg := gjson.GetBytes(b, wire.KeyCode), gjson.GetBytes(b, wire.KeyMessage)
	if code.Type != gjson.Number || msg.Type != gjson.String {
		return nil
	}
	return &RPCError{Code: int(code.Int()), Message: msg.String(), Data: gjson.GetBytes(b, wire.KeyData).String()}
}
