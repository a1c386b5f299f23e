package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/evtctl/evtctl/pkg/filter"
	"github.com/evtctl/evtctl/pkg/wire"
)

// The stream (package wire): evtctl's extension for catching up. One GET of wire.PathStream
// returns every item after a cursor (and before another, when given) that matches a query,
// oldest first, as JSON lines in one long chunked response, without the paging of the events
// method:
//
//	GET /events/stream?after=CURSOR&before=CURSOR&query=Q
//
// The reply's headers say where the log stands when the stream begins, as a page's oldest
// and newest do (wire.HeaderOldest, wire.HeaderNewest), so that a client sees at once
// whether events after its cursor were lost. Each line of the body is then an item,
// byte for byte as the events method writes it in a page ({"cursor":…,"event":…,"data":…}),
// except that stored JSON holding a line break is compacted so that an item is one line;
// the last line says how the stream ended:
//
//	{"end":{"more":false,"newest":"…"}}
//	{"end":{"more":true,"resume":"…","newest":"…"}}
//
// more:false: every item up to `before` (or up to the head when the stream was read) has
// been sent. more:true: the node stopped short — the filter's work budget, a range lost to
// damage, the node shutting down — and a client asks again after resume (or after its last
// item, if later). A stream that ends without that line was cut off: the client resumes
// after the last item it received. Errors before the first line are answered as GET /events
// answers them. A node advertises the stream in the wire.HeaderStream of its replies to the
// events method; a Tendermint node has none, and a client pages there.
const (
	streamStep  = 1000      // items read from the log at a time, at most
	streamFlush = 256 << 10 // bytes buffered before a write
)

// advertiseStream marks the replies of h as coming from a node that serves the stream.
func advertiseStream(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(wire.HeaderStream, wire.PathStream)
		h.ServeHTTP(w, r)
	})
}

// handleStream serves wire.PathStream.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed query string: "+err.Error())
		return
	}
	var q eventlog.Query
	q.Ascending = true
	work := 0
	bad := func(msg string) {
		// As the events method refuses them, with HTTP's word for a bad request.
		b, _ := json.Marshal(newRPCError(wire.CodeInternalError, msg))
		w.Header().Set("Content-Type", wire.MediaJSON)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(append(b, '\n'))
	}
	if q.After, err = cursor.Parse(values.Get(wire.ParamAfter)); err != nil {
		bad(err.Error())
		return
	}
	if q.Before, err = cursor.Parse(values.Get(wire.ParamBefore)); err != nil {
		bad(err.Error())
		return
	}
	if text := values.Get(wire.ParamQuery); text != "" {
		fq, err := filter.Compile(text)
		if err != nil {
			bad("invalid filter query: " + err.Error())
			return
		}
		if !fq.MatchesAll() {
			q.Match = fq.MatchJSON
			work = fq.Work()
		}
	}
	if n := s.streams.Add(1); n > int64(s.cfg.MaxStreams) {
		s.streams.Add(-1)
		// A client asks again after the delay, or reads the range page by page.
		b, _ := json.Marshal(newRPCError(wire.CodeBusy, fmt.Sprintf("the node serves %d streams at once, as many as it may; retry after the delay given, or page with the events method", s.cfg.MaxStreams)))
		retryAfter(w, 1)
		w.Header().Set("Content-Type", wire.MediaJSON)
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(append(b, '\n'))
		return
	}
	defer s.streams.Add(-1)
	st := streamer{s: s, w: w, rc: http.NewResponseController(w), q: q, work: work, left: s.cfg.ScanBudget}
	st.run(r)
}

// streamer is one stream being written. It holds about streamFlush bytes of memory: the
// items of a step are as many as fit in what is left of its buffer if each were as large
// as the largest of the step before.
type streamer struct {
	s     *Server
	w     http.ResponseWriter
	rc    *http.ResponseController
	q     eventlog.Query
	work  int   // the filter's passes over each byte
	left  int64 // scan budget left
	slot  readSlot
	buf   []byte
	began bool

	largest int           // the largest item of the last step that read any, encoded
	sent    int64         // bytes written
	waited  time.Duration // time spent in writes: waiting on the reader

	lastType string // the type of the last item and its JSON string, which runs of items share
	typeJSON []byte
}

func (st *streamer) run(r *http.Request) {
	ctx := r.Context()
	const bufSize = streamFlush + 64<<10
	if st.buf = getPageBuf(bufSize); cap(st.buf) > 2*bufSize {
		// A pooled page far larger than a stream needs stays in the pool.
		putPageBuf(st.buf)
		st.buf = make([]byte, 0, bufSize)
	}
	defer func() { putPageBuf(st.buf) }()
	perRecord := int64(max(st.work, 1)) * int64(st.s.cfg.MaxEventSize)
	st.slot = readSlot{s: st.s}
	if st.largest = int(st.s.largestItem.Load()); st.largest == 0 {
		st.largest = st.s.cfg.MaxEventSize
	}
	var newest cursor.Cursor
	for {
		select {
		case <-st.s.quit:
			st.end(true, st.q.After, newest) // shutting down: the client asks again
			return
		default:
		}
		q := st.q
		q.Max = min(streamStep, 1+max(streamFlush-len(st.buf), 0)/max(st.largest, minItemBytes))
		page, used, err := st.read(r, q, perRecord)
		if err != nil {
			if !st.began {
				st.fail(ctx, err)
			}
			// Once begun, a read error cuts the stream: the client resumes after its last item.
			return
		}
		newest = page.Newest
		if !st.began {
			st.began = true
			h := st.w.Header()
			h.Set("Content-Type", wire.MediaNDJSON)
			h.Set(wire.HeaderOldest, page.Oldest.String())
			h.Set(wire.HeaderNewest, page.Newest.String())
			h.Set("X-Content-Type-Options", "nosniff")
			st.w.WriteHeader(http.StatusOK)
		}
		if len(page.Items) > 0 {
			st.largest = 0
			for _, it := range page.Items {
				st.largest = max(st.largest, len(it.JSON)+len(it.Type)+64)
				st.item(it)
			}
		}
		var last cursor.Cursor
		if n := len(page.Items); n > 0 {
			last = page.Items[n-1].Cursor
		}
		full := len(page.Items) == q.Max
		page.Release()
		st.left -= used
		if !st.flush(false) {
			return
		}
		var next cursor.Cursor
		switch {
		case page.AtLoss:
			st.end(true, page.Resume, newest)
			return
		case !page.Resume.IsZero():
			next = page.Resume
		case page.More && full:
			next = last
		default:
			st.end(false, cursor.Cursor{}, newest)
			return
		}
		if (q.Match != nil && st.left < perRecord) || !progressed(st.q, next) {
			st.end(true, next, newest)
			return
		}
		st.q.After = next
	}
}

// read reads one step from the log in a read slot of the lane for the work the stream has
// done (lanes.go), as a page is read, and says what work its filter did; the slot is given
// back before the step is written.
func (st *streamer) read(r *http.Request, q eventlog.Query, perRecord int64) (page eventlog.Page, used int64, err error) {
	spent := st.s.cfg.ScanBudget - st.left
	if err := st.slot.take(r.Context(), q.Match != nil, spent); err != nil {
		return eventlog.Page{}, 0, err
	}
	defer st.slot.release()
	var count *scanCount
	if q.Match != nil {
		count = st.slot.counter(q.Match, st.work)
		q.Match, q.Budget = count.matchJSON, st.slot.stepBudget(st.left, spent, perRecord)
	}
	page, err = st.s.readLog(r.Context(), q)
	if count != nil {
		used = count.used.Load()
	}
	return page, used, err
}

// item appends one item as a line.
func (st *streamer) item(it eventlog.Item) {
	b := append(st.buf, itemCursor...)
	b = it.Cursor.Append(b)
	b = append(b, itemEvent...)
	if it.Type != st.lastType || st.typeJSON == nil {
		st.lastType = it.Type
		st.typeJSON = appendJSONString(st.typeJSON[:0], it.Type)
	}
	b = append(b, st.typeJSON...)
	b = append(b, itemData...)
	if bytes.IndexByte(it.JSON, '\n') >= 0 || bytes.IndexByte(it.JSON, '\r') >= 0 {
		// Stored as sent (binary mode): one line, as a client compacts it from a page.
		out := bytes.NewBuffer(b)
		if err := json.Compact(out, it.JSON); err == nil {
			b = out.Bytes()
		} else {
			b = append(b, it.JSON...) // not JSON: cannot be, it was checked when stored
		}
	} else {
		b = append(b, it.JSON...)
	}
	st.buf = append(b, "}\n"...)
}

// flush writes what is buffered once there is enough of it (or always), and reports false
// when the client has gone or is too slow. The reader is too slow once the stream's writes
// have waited on it for longer than StreamGrace plus a second for every MinStreamRate bytes
// sent: over the whole stream, not write by write, so that a reader that takes a few bytes
// now and then is not served for ever.
func (st *streamer) flush(always bool) bool {
	if len(st.buf) == 0 || (!always && len(st.buf) < streamFlush) {
		return true
	}
	cfg := &st.s.cfg
	sent := st.sent + int64(len(st.buf))
	allowed := cfg.StreamGrace + time.Duration(float64(sent)/float64(cfg.MinStreamRate)*float64(time.Second)) - st.waited
	if allowed <= 0 {
		return false
	}
	start := time.Now()
	_ = st.rc.SetWriteDeadline(start.Add(allowed))
	n, err := st.w.Write(st.buf)
	st.buf = st.buf[:0]
	if err == nil && always {
		err = st.rc.Flush()
	}
	st.waited += time.Since(start)
	st.sent += int64(n)
	return err == nil
}

// A stream's last line (wire.StreamEnd) as the streamer encodes it:
// {"end":{"more":B[,"resume":"C"],"newest":"C"}}.
const (
	endMore   = `{"` + wire.KeyEnd + `":{"` + wire.KeyMore + `":`
	endNewest = `,"` + wire.KeyNewest + `":"`
)

// end writes the last line and flushes.
func (st *streamer) end(more bool, resume, newest cursor.Cursor) {
	b := append(st.buf, endMore...)
	b = strconv.AppendBool(b, more)
	if more && !resume.IsZero() {
		b = append(b, replyResume...)
		b = resume.Append(b)
		b = append(b, '"')
	}
	b = append(b, endNewest...)
	b = newest.Append(b)
	st.buf = append(b, "\"}}\n"...)
	st.flush(true)
}

// fail answers a stream that could not begin: 503 with Retry-After when the log is
// unavailable for now, else 500, with the error as GET /events words it.
func (st *streamer) fail(ctx context.Context, err error) {
	rerr := st.s.readError(ctx, err)
	status := http.StatusInternalServerError
	if rerr.retryAfter > 0 {
		retryAfter(st.w, rerr.retryAfter)
		status = http.StatusServiceUnavailable
	}
	b, _ := json.Marshal(rerr)
	st.w.Header().Set("Content-Type", wire.MediaJSON)
	st.w.WriteHeader(status)
	_, _ = st.w.Write(append(b, '\n'))
}
