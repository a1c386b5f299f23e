// Package server is the node's HTTP API: the `events` method of Tendermint's ADR-075 over
// JSON-RPC and GET, CloudEvents ingest, Evented API signals, health and metrics.
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/parker"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Config configures a Server. Zero values take the defaults noted.
type Config struct {
	Store        eventlog.Store
	DefaultItems int           // items per page when a request asks for none; default 10
	MaxItems     int           // cap on items per page; default 100
	DefaultWait  time.Duration // long-poll wait when a request gives none; default 1s
	MaxWait      time.Duration // cap on long-poll waits; default 30s
	MaxBody      int64         // cap on an ingest request body; default 8 MiB
	MaxRPCBody   int64         // cap on a JSON-RPC request body; default 1 MiB
	MaxEventSize int           // cap on one event in JSON format; default 64 KiB
	MaxWaiters   int           // long-polls waiting at once; default 20,000
	MaxIngest    int           // ingest requests being decoded and appended at once; default 64
	MaxReads     int           // log reads (pages being built) at once; default 4 × GOMAXPROCS
	// MaxScans bounds the filtered reads that go on at once once they have done a quick
	// read's work (quickWork), in a lane of their own beside MaxReads' so that costly scans
	// never hold up a cheap read; default GOMAXPROCS/2, at least 1.
	MaxScans int
	// MaxStreams bounds the streams (wire.PathStream) served at once; one more is answered 503
	// with Retry-After. Each holds about its write buffer (streamFlush) of memory. Default 64.
	MaxStreams int
	// StreamGrace and MinStreamRate decide when a stream's reader is too slow: once its
	// writes have waited on the reader for longer than StreamGrace plus a second for every
	// MinStreamRate bytes the stream has sent, the stream is cut off (the client resumes
	// after its last item). Defaults 30s and 256 KiB/s.
	StreamGrace   time.Duration
	MinStreamRate int64
	ReadToken     string // bearer token for reading (events, metrics); "" = open
	IngestToken   string // bearer token for ingest and signals; "" = open
	Logger        *slog.Logger
	Version       string
	// BodyTimeout bounds the time to receive a request body once its headers are in; default 10s.
	BodyTimeout time.Duration
	// MaxBodyMemory bounds the bytes of ingest and signal bodies held at once, all such
	// requests together, counted as the bytes arrive and until the request no longer needs
	// them; default 64 MiB, and at least MaxBody.
	MaxBodyMemory int64
	// MaxRPCBodyMemory bounds the bytes of JSON-RPC request bodies (readers') held at once,
	// apart from MaxBodyMemory, so that readers never take producers' room nor the other way
	// round; default 16 MiB, and at least MaxRPCBody.
	MaxRPCBodyMemory int64
	// MaxReplyBytes bounds the pages of the reply to one request, all calls of a JSON-RPC
	// batch together: a page that would go past it is cut short (more:true). Default 4 MiB;
	// at least twice MaxEventSize and 16 KiB, room for one item of the largest size.
	MaxReplyBytes int
	// ScanBudget bounds the work of one request's filter: the bytes of events it examines,
	// each counted once for every pass the filter makes over it (filter.Query.Work). A read
	// that spends it stops and says where to resume; default 1.5e9, about a second of CPU for
	// the costliest filter.
	ScanBudget int64
}

// Server is an http.Handler serving the node's API.
type Server struct {
	cfg      Config
	log      *slog.Logger
	mux      *http.ServeMux
	metrics  *metrics
	quit     chan struct{}
	quitOnce sync.Once
	waiters  atomic.Int64
	streams  atomic.Int64 // streams being served (MaxStreams)

	// Runs of failures, summed up in the node's log (outage.go).
	appendsDown, appendsFailed, readsDown, readsFailed outage
	bodies                                             bodyRoom // ingest and signal bodies held (MaxBodyMemory)
	rpcBody                                            bodyRoom // JSON-RPC bodies held (MaxRPCBodyMemory)

	largestItem atomic.Int64  // the largest item the last read step that saw any saw (readInto)
	ingest      chan struct{} // semaphore
	reads       chan struct{} // semaphore: bounds the memory and CPU that page building takes
	scans       chan struct{} // semaphore: filtered reads past quickWork (lanes.go)
	limits      cevent.Limits
	shared      shareCache // reads shared by long-polls asking the same
	orders      orderGate  // sequences of ordered batches (order.go)

	readToken *[sha256.Size]byte // the digest of Config.ReadToken; nil when it is ""
	parkOnce  sync.Once
	park      atomic.Pointer[parking] // started by Attach; nil where connections cannot be watched
}

// New returns a Server for cfg.
func New(cfg Config) *Server {
	if cfg.DefaultItems <= 0 {
		cfg.DefaultItems = 10
	}
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = 100
	}
	if cfg.DefaultWait <= 0 {
		cfg.DefaultWait = time.Second
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 30 * time.Second
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 8 << 20
	}
	if cfg.MaxRPCBody <= 0 {
		cfg.MaxRPCBody = 1 << 20
	}
	if cfg.MaxEventSize <= 0 {
		cfg.MaxEventSize = 64 << 10
	}
	if cfg.MaxWaiters <= 0 {
		cfg.MaxWaiters = 20_000
	}
	if cfg.MaxReads <= 0 {
		cfg.MaxReads = 4 * runtime.GOMAXPROCS(0)
	}
	if cfg.MaxScans <= 0 {
		cfg.MaxScans = max(runtime.GOMAXPROCS(0)/2, 1)
	}
	if cfg.MaxStreams <= 0 {
		cfg.MaxStreams = 64
	}
	if cfg.StreamGrace <= 0 {
		cfg.StreamGrace = 30 * time.Second
	}
	if cfg.MinStreamRate <= 0 {
		cfg.MinStreamRate = 256 << 10
	}
	if cfg.MaxIngest <= 0 {
		cfg.MaxIngest = 64
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.MaxBodyMemory <= 0 {
		cfg.MaxBodyMemory = 64 << 20
	}
	if cfg.MaxRPCBodyMemory <= 0 {
		cfg.MaxRPCBodyMemory = 16 << 20
	}
	// Room for at least one body of the largest size, or such bodies would never be taken.
	cfg.MaxBodyMemory = max(cfg.MaxBodyMemory, cfg.MaxBody)
	cfg.MaxRPCBodyMemory = max(cfg.MaxRPCBodyMemory, cfg.MaxRPCBody)
	if cfg.MaxReplyBytes <= 0 {
		cfg.MaxReplyBytes = 4 << 20
	}
	// A reply always has room for one item of the largest size (an event whose type is as
	// long as the rest of it, which an item holds twice), and for the ends of a batch's
	// other replies.
	cfg.MaxReplyBytes = max(cfg.MaxReplyBytes, 2*cfg.MaxEventSize+16<<10)
	if cfg.ScanBudget <= 0 {
		cfg.ScanBudget = 1_500_000_000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:    cfg,
		log:    cfg.Logger,
		mux:    http.NewServeMux(),
		quit:   make(chan struct{}),
		ingest: make(chan struct{}, cfg.MaxIngest),
		reads:  make(chan struct{}, cfg.MaxReads),
		scans:  make(chan struct{}, cfg.MaxScans),
		limits: cevent.Limits{MaxEventBytes: cfg.MaxEventSize},
	}
	s.bodies.max, s.rpcBody.max = cfg.MaxBodyMemory, cfg.MaxRPCBodyMemory
	s.appendsDown = outage{what: "appends to the event log are refused", still: "appends to the event log are still refused",
		again: "appends to the event log are taken again", count: "refused", level: slog.LevelWarn}
	s.appendsFailed = outage{what: "appends to the event log fail", still: "appends to the event log still fail",
		again: "appends to the event log succeed again", count: "failed", level: slog.LevelError}
	s.readsDown = outage{what: "reads of the event log are refused", still: "reads of the event log are still refused",
		again: "reads of the event log succeed again", count: "refused", level: slog.LevelWarn}
	s.readsFailed = outage{what: "reads of the event log fail", still: "reads of the event log still fail",
		again: "reads of the event log succeed again", count: "failed", level: slog.LevelError}
	if cfg.ReadToken != "" {
		d := sha256.Sum256([]byte(cfg.ReadToken))
		s.readToken = &d
	}
	s.metrics = newMetrics(s)
	s.route("POST "+wire.PathRPC+"{$}", "rpc", advertiseStream(s.read(s.handleRPC)))
	s.route("GET "+wire.PathEvents, "events_get", advertiseStream(s.read(s.handleGetEvents)))
	s.route("GET "+wire.PathStream, "stream", s.read(s.handleStream))
	s.route("POST "+wire.PathEvents, "ingest", s.write(s.handleIngest))
	s.route("OPTIONS "+wire.PathEvents, "ingest_options", http.HandlerFunc(cevent.HandleWebhookOptions))
	s.route("/signal/{entity}", "signal", s.write(s.handleSignal))
	s.route("GET "+wire.PathHealth, "healthz", http.HandlerFunc(s.handleHealth))
	s.route("GET "+wire.PathMetrics, "metrics", s.read(s.metrics.handler()))
	s.route("GET /{$}", "index", http.HandlerFunc(s.handleIndex))
	return s
}

func (s *Server) route(pattern, name string, h http.Handler) {
	s.mux.Handle(pattern, s.metrics.instrument(name, h))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Shutdown wakes every waiting long-poll, which answers at once with what it has. Call it
// before http.Server.Shutdown, with the same context, so that waiting readers do not hold
// shutdown up. It returns once the replies of parked long-polls are written and the
// connections the parker held between requests closed, or when ctx ends first (a read of
// the log holds a reply up), with ctx's error. Calls after the first return at once.
func (s *Server) Shutdown(ctx context.Context) error {
	var err error
	s.quitOnce.Do(func() {
		close(s.quit)
		s.parkOnce.Do(func() {}) // none is started from now on
		if pk := s.park.Load(); pk != nil {
			err = pk.p.Shutdown(ctx)
		}
	})
	return err
}

// Waiters is the number of long-polls waiting now.
func (s *Server) Waiters() int64 { return s.waiters.Load() }

// Parks says whether long-polls wait parked out of net/http (after Attach, on Linux, while
// the connections can be watched).
func (s *Server) Parks() bool {
	pk := s.park.Load()
	return pk != nil && !pk.p.Off()
}

// Parked is the number of connections the parker holds out of net/http: those of waiting
// long-polls, and those between requests.
func (s *Server) Parked() int {
	pk := s.park.Load()
	if pk == nil {
		return 0
	}
	return pk.p.Held()
}

// --- auth -------------------------------------------------------------------------------

func (s *Server) read(h http.HandlerFunc) http.Handler  { return s.auth(s.cfg.ReadToken, h) }
func (s *Server) write(h http.HandlerFunc) http.Handler { return s.auth(s.cfg.IngestToken, h) }

func (s *Server) auth(token string, h http.HandlerFunc) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evtctl"`)
			writeError(w, http.StatusUnauthorized, "this node requires a bearer token: send Authorization: Bearer <token>")
			return
		}
		if got, ok := bearer(r); !ok || !tokenIs(got, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="evtctl", error="invalid_token"`)
			writeError(w, http.StatusUnauthorized, "the bearer token is not valid for this endpoint")
			return
		}
		h(w, r)
	})
}

// bearer returns the token of a request's Authorization header in the Bearer scheme, whose
// name is matched without regard to case (RFC 7235).
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimLeft(token, " "), true
}

// tokenIs compares a token with the digest of the one wanted in constant time, its length
// included.
func tokenIs(got string, want [sha256.Size]byte) bool {
	sum := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// --- plain JSON replies -----------------------------------------------------------------

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding the reply failed"}`)
	}
	w.Header().Set("Content-Type", wire.MediaJSON)
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.ErrorBody{Error: msg})
}

func retryAfter(w http.ResponseWriter, seconds int) {
	w.Header().Set(wire.HeaderRetryAfter, strconv.Itoa(seconds))
}

// handleHealth stays open for load balancers; with a read token set, details (counts,
// cursors, errors) are shown only to a caller that sends it. The paths of the node's files
// (in damaged ranges, with their offsets, and in error texts) are shown only to a caller
// that sends the read token: a node without one keeps them to its log.
//
// Status: "ok"; "degraded" (HTTP 200: the node serves, but ranges of its log were lost to
// damage, or appends are refused for a passing reason such as a full disk — details say
// which); "failed" or "shutting down" (HTTP 503).
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	detail, private := s.readToken == nil, false
	if got, ok := bearer(r); ok && s.readToken != nil {
		detail = tokenIs(got, *s.readToken)
		private = detail
	}
	errText := func(err error) string {
		if private {
			return err.Error()
		}
		return publicText(err.Error())
	}
	if f, ok := s.cfg.Store.(interface{ Failed() error }); ok {
		if err := f.Failed(); err != nil {
			body := map[string]string{"status": "failed"}
			if detail {
				body["error"] = errText(err)
			}
			writeJSON(w, http.StatusServiceUnavailable, body)
			return
		}
	}
	select {
	case <-s.quit:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "shutting down"})
		return
	default:
	}
	st := s.cfg.Store.Stats()
	unwritable := s.unwritable()
	status := "ok"
	if len(st.Damage) > 0 || unwritable != nil {
		status = "degraded"
	}
	if !detail {
		writeJSON(w, http.StatusOK, map[string]string{"status": status})
		return
	}
	body := map[string]any{
		"status": status, "version": s.cfg.Version,
		"items": st.Items, "oldest": st.Oldest, "newest": st.Newest,
		"checked": st.Checked,
	}
	if len(st.Damage) > 0 {
		ranges := make([]map[string]any, len(st.Damage))
		for i, d := range st.Damage {
			rg := map[string]any{"first_seq": d.First, "last_seq": d.Last, "events": d.Count(), "reason": d.Reason}
			if !d.After.IsZero() {
				rg["after"] = d.After.String()
			}
			if !d.Next.IsZero() {
				rg["next"] = d.Next.String()
			}
			if d.File != "" && private {
				rg["file"], rg["offset"] = d.File, d.Offset
				if d.End > 0 {
					rg["end"] = d.End
				}
			}
			ranges[i] = rg
		}
		body["damaged"], body["lost_events"] = ranges, st.Lost
	}
	if unwritable != nil {
		body["appends"] = "refused for now: " + errText(unwritable)
	}
	writeJSON(w, http.StatusOK, body)
}

// absPath finds absolute paths in a text: /a/b after the start, a space, a quote, '=', '('
// or '['; C:\a\b likewise. A URL's path (after "scheme:") is not one.
var absPath = regexp.MustCompile(`(^|[\s"'=(\[])(/[^\s"',;:)\]]+|[A-Za-z]:\\[^\s"',;:)\]]+)`)

// publicText is an error's text for clients: each absolute path in it cut to its last
// element, so that the node's directories stay in its log.
func publicText(s string) string {
	if !strings.ContainsAny(s, `/\`) {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range absPath.FindAllStringSubmatchIndex(s, -1) {
		p := strings.TrimRight(s[m[4]:m[5]], `/\`)
		b.WriteString(s[last:m[4]])
		b.WriteString(p[strings.LastIndexAny(p, `/\`)+1:])
		last = m[5]
	}
	b.WriteString(s[last:])
	return b.String()
}

// unwritable is why appends fail for now, when the store says so (a full disk).
func (s *Server) unwritable() error {
	if u, ok := s.cfg.Store.(interface{ Unwritable() error }); ok {
		return u.Unwritable()
	}
	return nil
}

func (s *Server) handleIndex(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "evtctl node %s\n\n"+
		"POST %-15sJSON-RPC 2.0, method %q (Tendermint ADR-075)\n"+
		"GET  %-15sthe events method by query string\n"+
		"POST %-15sCloudEvents ingest: binary, structured or batch\n"+
		"/signal/<entity>    Evented API signals\n"+
		"GET  %-15shealth\n"+
		"GET  %-15sPrometheus metrics\n", s.cfg.Version, wire.PathRPC, wire.Method, wire.PathEvents, wire.PathEvents, wire.PathHealth, wire.PathMetrics)
}

// --- events -------------------------------------------------------------------------------

// rpcError is a JSON-RPC error object, and when to retry.
type rpcError struct {
	wire.Error

	retryAfter int // seconds, sent as Retry-After with a single call's reply; 0: none
}

// maxErrorData bounds the data of an error object: a message may quote a request, and a
// reply must not grow with what a client sends.
const maxErrorData = 1 << 10

func newRPCError(code int, data string) *rpcError {
	return &rpcError{Error: wire.Error{Code: code, Message: wire.Message(code), Data: cutText(data, maxErrorData)}}
}

// cutText returns s, or when it is longer than n bytes its first bytes and "…", n bytes in
// all at most, cut between two characters.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const more = "…"
	i := max(n-len(more), 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + more
}

func (s *Server) handleRPC(w http.ResponseWriter, r *http.Request) {
	body, held, ok := s.readBody(w, r, s.cfg.MaxRPCBody, "", &s.rpcBody)
	if !ok {
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 && body[0] == '[' {
		var reqs []json.RawMessage // copies: the body can go
		err := json.Unmarshal(body, &reqs)
		s.rpcBody.release(held)
		s.handleBatch(w, r, reqs, err)
		return
	}
	id, p, rerr := decodeCall(body)
	s.rpcBody.release(held)
	if rerr == nil && p == nil {
		// A notification: HTTP 200 with no body, as from a Tendermint node.
		w.WriteHeader(http.StatusOK)
		return
	}
	var res result
	if rerr == nil {
		// The page is bounded; the envelope and the id, which echoes the request, come on top.
		res, rerr = s.eventsParked(w, r, p, call{id: id})
		if res.parked {
			return
		}
	}
	s.writeCall(w, id, res, rerr)
	res.release()
}

// eventsParked runs the method for a request of one call, and parks the call when it must
// wait and its connection can be parked; then the result says parked, and the parker
// answers.
func (s *Server) eventsParked(w http.ResponseWriter, r *http.Request, p *eventsParams, c call) (result, *rpcError) {
	via := parker.Via(r)
	if via == nil {
		return s.events(r.Context(), p)
	}
	res, rerr, pl := s.eventsOrPark(r.Context(), p)
	if pl == nil {
		return res, rerr
	}
	c.pl, c.get, c.start = pl, r.Method == http.MethodGet, time.Now()
	c.due = c.start.Add(pl.wait)
	if s.parkRequest(w, r, via, c) {
		return result{parked: true}, nil
	}
	return s.waitFor(r.Context(), pl)
}

// envelopeSize is room for the JSON-RPC envelope of a reply with this id.
func envelopeSize(id json.RawMessage) int { return len(id) + 48 }

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request, reqs []json.RawMessage, err error) {
	var out bytes.Buffer
	if err != nil {
		s.writeRPC(w, &out, nil, nil, newRPCError(wire.CodeParseError, "the body is not valid JSON: "+err.Error()))
		return
	}
	if len(reqs) == 0 {
		s.writeRPC(w, &out, nil, nil, newRPCError(wire.CodeInvalidRequest, "an empty batch"))
		return
	}
	if len(reqs) > 16 {
		s.writeRPC(w, &out, nil, nil, newRPCError(wire.CodeInvalidRequest, "a batch may hold at most 16 calls"))
		return
	}
	// The calls run one after another; they share one wait, so that a batch of
	// long-polls answers within the write timeout, as a single call does, and one reply
	// budget, of which each call keeps back room for the replies of the calls after it.
	// Each reply is written as soon as it is ready: the batch never holds more than one
	// page.
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.MaxWait)
	defer cancel()
	calls := make([]batchCall, len(reqs))
	kept := 0 // room kept back for the calls not yet run
	for i, raw := range reqs {
		c := &calls[i]
		c.id, c.p, c.rerr = decodeCall(raw)
		reqs[i] = nil
		switch {
		case c.rerr != nil:
			// Its reply is known: it takes what it takes.
			out.Reset()
			appendRPC(&out, c.id, nil, c.rerr)
			c.room = out.Len() + 1
		case c.p != nil:
			// A page with no items, or an error of the read, whose message is cut to fit.
			c.room = envelopeSize(c.id) + callRoom
		}
		kept += c.room
	}
	left := s.cfg.MaxReplyBytes
	scan := s.cfg.ScanBudget
	replies, items := 0, 0
	for i := range calls {
		c := &calls[i]
		if c.rerr == nil && c.p == nil {
			continue // a notification has no place among the replies
		}
		kept -= c.room
		var res result
		rerr := c.rerr
		if rerr == nil {
			res, rerr = s.eventsWithin(ctx, c.p, callBudget{reply: left - kept - envelopeSize(c.id), force: items == 0, scan: &scan})
		}
		out.Reset()
		if replies == 0 {
			w.Header().Set("Content-Type", wire.MediaJSON)
			out.WriteByte('[')
		} else {
			out.WriteByte(',')
		}
		replies++
		items += res.items
		var err error
		if rerr != nil {
			if c.rerr == nil {
				rerr = fitError(rerr, callRoom)
			}
			appendRPC(&out, c.id, nil, rerr)
			_, err = w.Write(out.Bytes())
		} else {
			appendRPC(&out, c.id, nil, nil)
			out.Truncate(out.Len() - 1) // without the closing brace
			if _, err = w.Write(out.Bytes()); err == nil {
				if _, err = w.Write(res.b); err == nil {
					_, err = w.Write([]byte("}"))
				}
			}
			res.release()
		}
		if err != nil {
			return // the client is gone, or too slow: the other calls are not read for it
		}
		left -= out.Len() + len(res.b) + 1
	}
	if replies == 0 {
		// Notifications alone: nothing to answer, as with a single one.
		w.WriteHeader(http.StatusOK)
		return
	}
	_, _ = w.Write([]byte("]\n"))
}

// batchCall is one call of a batch, decoded.
type batchCall struct {
	id   json.RawMessage
	p    *eventsParams // nil for a notification or an error
	rerr *rpcError
	room int // bytes its reply takes at least: its error, or a page without items
}

// callRoom is the room of a call's reply in a batch beside its envelope, kept for it until it
// runs: the end of a page, or an error object.
const callRoom = 2 * replyTrailer

// fitError returns e with its data cut so that the error object takes at most n bytes.
func fitError(e *rpcError, n int) *rpcError {
	b, _ := json.Marshal(e)
	if len(b) <= n {
		return e
	}
	cut := *e
	// JSON may take up to six bytes for one of the data's.
	cut.Data = cutText(e.Data, max(len(e.Data)-(len(b)-n), 0))
	for {
		b, _ = json.Marshal(&cut)
		if len(b) <= n || cut.Data == "" {
			return &cut
		}
		cut.Data = cutText(cut.Data, len(cut.Data)/2)
	}
}

func (s *Server) writeCall(w http.ResponseWriter, id json.RawMessage, res result, rerr *rpcError) {
	var out bytes.Buffer
	if rerr != nil {
		if rerr.retryAfter > 0 {
			retryAfter(w, rerr.retryAfter)
		}
		appendRPC(&out, id, nil, rerr)
		writeRaw(w, out.Bytes())
		return
	}
	// Write the envelope around the result rather than copying a page of up to megabytes.
	appendRPC(&out, id, nil, nil)
	head := out.Bytes()[:out.Len()-1] // without the closing brace
	w.Header().Set("Content-Type", wire.MediaJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(head)+len(res.b)+2))
	_, _ = w.Write(head)
	_, _ = w.Write(res.b)
	_, _ = w.Write([]byte("}\n"))
}

func writeRaw(w http.ResponseWriter, b []byte) {
	b = append(b, '\n')
	w.Header().Set("Content-Type", wire.MediaJSON)
	// A length lets the client read a large page in one allocation, not chunk by chunk.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (s *Server) writeRPC(w http.ResponseWriter, out *bytes.Buffer, id json.RawMessage, result []byte, e *rpcError) {
	appendRPC(out, id, result, e)
	writeRaw(w, out.Bytes())
}

// A JSON-RPC response object as encoded by hand: {"jsonrpc":"2.0","id":ID,"result":R} or
// {"jsonrpc":"2.0","id":ID,"error":E}.
const (
	envelopeHead   = `{"` + wire.KeyJSONRPC + `":"` + wire.Version + `","` + wire.KeyID + `":`
	envelopeResult = `,"` + wire.KeyResult + `":`
	envelopeError  = `,"` + wire.KeyError + `":`
)

// appendRPC writes one JSON-RPC response object.
func appendRPC(out *bytes.Buffer, id json.RawMessage, result []byte, e *rpcError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	out.WriteString(envelopeHead)
	out.Write(id)
	if e != nil {
		b, _ := json.Marshal(e)
		out.WriteString(envelopeError)
		out.Write(b)
	} else {
		out.WriteString(envelopeResult)
		out.Write(result)
	}
	out.WriteByte('}')
}

// decodeCall decodes a request object: the id and params of a call, an error to answer
// (with the id, if it could be read), or for a notification nothing at all. The id is a
// copy, so that a long-poll does not keep the request body while it waits.
func decodeCall(raw []byte) (json.RawMessage, *eventsParams, *rpcError) {
	id, p, call, rerr := decodeCallValue(raw)
	if !call {
		return id, nil, rerr
	}
	return id, &p, nil
}

// decodeCallValue is decodeCall with the params of a call in place (call true), for a caller
// that keeps them no longer than it runs.
func decodeCallValue(raw []byte) (id json.RawMessage, p eventsParams, call bool, rerr *rpcError) {
	if id, p, ok := decodeCallFast(raw); ok {
		return id, p, true, nil
	}
	id, pp, rerr := decodeCallSlow(raw)
	if pp == nil {
		return id, eventsParams{}, false, rerr
	}
	return id, *pp, true, nil
}

// decodeCallSlow decodes any request object as a Tendermint node does (Go's encoding/json:
// member names without regard to case, the last of two winning), with JSON-RPC 2.0's codes.
// "jsonrpc" may be left out. A call without an id, or with a null one, is a notification; an
// id is otherwise a string or a whole number.
func decodeCallSlow(raw []byte) (json.RawMessage, *eventsParams, *rpcError) {
	var req wire.Request[json.RawMessage]
	if err := json.Unmarshal(raw, &req); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || !json.Valid(raw) {
			return nil, nil, newRPCError(wire.CodeParseError, "the body is not valid JSON: "+err.Error())
		}
		return nil, nil, newRPCError(wire.CodeInvalidRequest, "want a JSON-RPC 2.0 request object: "+err.Error())
	}
	var id json.RawMessage
	if !isNull(req.ID) && len(req.ID) > 0 {
		if !validID(req.ID) {
			return nil, nil, newRPCError(wire.CodeInvalidRequest, "the id must be a string or a whole number, got "+abbreviate(req.ID))
		}
		id = echoID(req.ID)
	}
	if req.JSONRPC != "" && req.JSONRPC != wire.Version {
		return id, nil, newRPCError(wire.CodeInvalidRequest, fmt.Sprintf("%q must be %q", wire.KeyJSONRPC, wire.Version))
	}
	if id == nil {
		return nil, nil, nil // a notification
	}
	if req.Method != wire.Method {
		return id, nil, newRPCError(wire.CodeMethodNotFound, fmt.Sprintf("method %q is not served here; this node serves %q", req.Method, wire.Method))
	}
	p, err := decodeParams(req.Params)
	if err != nil {
		return id, nil, newRPCError(wire.CodeInvalidParams, err.Error())
	}
	return id, &p, nil
}

// echoID returns the id to echo, a copy: as sent, unless it is a string holding bytes that are
// not UTF-8, which JSON text may not hold (RFC 8259). Such a string is echoed with each of
// those bytes replaced by U+FFFD: what a lenient decoder (Go's, for one) reads from the id as
// sent, so that a client still finds its reply, while one that decodes strictly is not given
// invalid JSON. (A Tendermint node echoes the bytes as they are.)
func echoID(id []byte) json.RawMessage {
	if id[0] != '"' || utf8.Valid(id) {
		return bytes.Clone(id)
	}
	var s string
	_ = json.Unmarshal(id, &s) // valid JSON: each byte that is not UTF-8 becomes U+FFFD
	b, _ := json.Marshal(s)
	return b
}

// validID reports whether an id's JSON text is a string or a whole number.
func validID(id []byte) bool {
	if id[0] == '"' {
		return true
	}
	digits := bytes.TrimPrefix(id, []byte("-"))
	return len(digits) > 0 && bytes.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) < 0
}

func (s *Server) handleGetEvents(w http.ResponseWriter, r *http.Request) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// Not a query string at all (a bad %-escape, a semicolon): what the client meant
		// cannot be told, so nothing is taken from it.
		writeError(w, http.StatusBadRequest, "malformed query string: "+err.Error())
		return
	}
	p, err := paramsFromQuery(values)
	var res result
	var rerr *rpcError
	switch {
	case err != nil:
		rerr = newRPCError(wire.CodeInvalidParams, err.Error())
	case r.Method != http.MethodGet || r.ContentLength != 0 || r.TransferEncoding != nil:
		// Not parked: the reply to a HEAD has no body, and a body nothing reads stays on
		// the connection.
		res, rerr = s.events(r.Context(), &p)
	default:
		if res, rerr = s.eventsParked(w, r, &p, call{}); res.parked {
			return
		}
	}
	writeGet(w, res, rerr)
	res.release()
}

func writeGet(w http.ResponseWriter, res result, rerr *rpcError) {
	if rerr != nil {
		// As Tendermint does for GET: the bare error object, with HTTP 200.
		if rerr.retryAfter > 0 {
			retryAfter(w, rerr.retryAfter)
		}
		b, _ := json.Marshal(rerr)
		writeRaw(w, b)
		return
	}
	// The page may be shared with other replies: write it as it is, then the newline.
	w.Header().Set("Content-Type", wire.MediaJSON)
	w.Header().Set("Content-Length", strconv.Itoa(len(res.b)+1))
	_, _ = w.Write(res.b)
	_, _ = w.Write([]byte("\n"))
}

// --- ingest -------------------------------------------------------------------------------

func tooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}

// acquireIngest takes an ingest slot, waiting briefly; false means the node is saturated.
func (s *Server) acquireIngest(ctx context.Context) bool {
	select {
	case s.ingest <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(250 * time.Millisecond)
	defer t.Stop()
	select {
	case s.ingest <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// beginIngest reads the size-limited body, then takes an ingest slot: a client that is slow
// to send its body holds no slot, only the bytes it has sent (see readBody). When ok is false
// it has answered the request; otherwise the caller must call done.
func (s *Server) beginIngest(w http.ResponseWriter, r *http.Request) (body []byte, done func(), ok bool) {
	body, held, ok := s.readBody(w, r, s.cfg.MaxBody, "; send fewer events per batch", &s.bodies)
	if !ok {
		return nil, nil, false
	}
	if !s.acquireIngest(r.Context()) {
		s.bodies.release(held)
		retryAfter(w, 1)
		writeError(w, http.StatusServiceUnavailable, "the node is taking in as much as it can; retry after the delay given")
		return nil, nil, false
	}
	return body, func() { <-s.ingest; s.bodies.release(held) }, true
}

// firstBodyRead is the room a body is read into before any of it has arrived (or the
// whole body when it is smaller).
const firstBodyRead = 4 << 10

// readBody reads a request body of at most limit bytes, which must arrive within
// BodyTimeout, into memory counted in room as the bytes arrive: a request that says its body
// is large and sends none of it holds next to nothing. When ok is false it has answered the
// request; otherwise the caller calls room.release(held) once it no longer holds the body.
// hint follows the message of a body over the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, limit int64, hint string, room *bodyRoom) (body []byte, held int64, ok bool) {
	setReadDeadline(w, time.Now().Add(s.cfg.BodyTimeout))
	var err error
	full := false
	if r.ContentLength > limit {
		// Said to be too large: refused without reading it.
		w.Header().Set("Connection", "close")
		err = &http.MaxBytesError{Limit: limit}
	} else {
		body, held, full, err = readCounted(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit, room)
	}
	switch {
	case full:
		room.release(held)
		w.Header().Set("Connection", "close")
		retryAfter(w, 1)
		writeError(w, http.StatusServiceUnavailable, "the node holds as many request bodies as it can; retry after the delay given")
		return nil, 0, false
	case err == nil:
		// The body is in: a long-poll that follows must not be cut off by the deadline.
		setReadDeadline(w, time.Time{})
		return body, held, true
	}
	room.release(held)
	switch {
	case tooLarge(err):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is over the limit of %d bytes%s", limit, hint))
	case errors.Is(err, os.ErrDeadlineExceeded):
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusRequestTimeout, fmt.Sprintf("the request body did not arrive within %v", s.cfg.BodyTimeout))
	default:
		writeError(w, http.StatusBadRequest, "reading the request body: "+err.Error())
	}
	return nil, 0, false
}

// readCounted reads src, a body of length bytes (-1: unknown, at most limit), into memory
// counted in room as it grows: full when room had none left. held is what it counted, to
// be released also when it fails.
//
// The memory a request holds stays within twice what its client has sent (and
// firstBodyRead): a body is read into pooled buffers that double as they fill until half of
// it has come, then into one buffer of its whole length, the bytes so far copied over; a
// body of unknown length into the pooled buffers to its end, then copied into one of its
// length. A small body is read straight into one buffer of its length.
func readCounted(src io.Reader, length, limit int64, room *bodyRoom) (body []byte, held int64, full bool, err error) {
	if length == 0 {
		return nil, 0, false, nil
	}
	if length > 0 && length <= firstBodyRead {
		if !room.hold(&held, length) {
			return nil, held, true, nil
		}
		body = make([]byte, length)
		if _, err = io.ReadFull(src, body); err != nil {
			return nil, held, false, err
		}
		return body, held, false, nil
	}
	want := length // the most bytes to make room for
	if want < 0 {
		want = limit + 1 // one past the limit: MaxBytesReader tells a body over it
	}
	// buf: a pooled buffer while what came is less than half the body, then body itself.
	var buf []byte
	pooled := func(n int64) bool {
		nb := getBodyBuf(int(n))
		if !room.hold(&held, int64(cap(nb))) {
			putBodyBuf(nb)
			return false
		}
		nb = append(nb, buf...)
		if buf != nil {
			room.release(int64(cap(buf)))
			held -= int64(cap(buf))
			putBodyBuf(buf)
		}
		buf = nb
		return true
	}
	defer func() { putBodyBuf(buf) }() // unless it became body
	if !pooled(firstBodyRead) {
		return nil, held, true, nil
	}
	final := false // buf is the body's own buffer
	for int64(len(buf)) < want {
		if !final && length > 0 && 2*int64(len(buf)) >= length {
			// Half of it has come: the rest goes straight into a buffer of its length, which
			// is counted in place of the pooled one.
			room.release(int64(cap(buf)))
			held -= int64(cap(buf))
			if !room.hold(&held, length) {
				return nil, held, true, nil
			}
			nb := make([]byte, len(buf), length)
			copy(nb, buf)
			putBodyBuf(buf)
			buf, final = nb, true
		} else if len(buf) == cap(buf) {
			if !pooled(min(2*int64(cap(buf)), want)) {
				return nil, held, true, nil
			}
		}
		var n int
		n, err = src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if length >= 0 && int64(len(buf)) < length {
				return nil, held, false, io.ErrUnexpectedEOF
			}
			break
		}
		if err != nil {
			return nil, held, false, err
		}
	}
	if final {
		body, buf = buf, nil
		return body, held, false, nil
	}
	// A body of unknown length, or one that ended early: copied out of the pooled buffer.
	body = append([]byte(nil), buf...)
	room.release(int64(cap(buf)))
	held -= int64(cap(buf))
	if !room.hold(&held, int64(len(body))) {
		return nil, held, true, nil
	}
	return body, held, false, nil
}

// Pooled buffers for bodies being received, by powers of two from firstBodyRead.
var bodyBufs [16]sync.Pool // of *[]byte

func bodyBufClass(n int) int {
	c := 0
	for firstBodyRead<<c < n {
		c++
	}
	return c
}

// getBodyBuf returns an empty buffer of at least n bytes: a power of two times
// firstBodyRead.
func getBodyBuf(n int) []byte {
	c := bodyBufClass(n)
	if c < len(bodyBufs) {
		if p, ok := bodyBufs[c].Get().(*[]byte); ok {
			return (*p)[:0]
		}
	}
	return make([]byte, 0, firstBodyRead<<c)
}

// putBodyBuf returns a buffer of getBodyBuf's to the pool (any other is left alone).
func putBodyBuf(b []byte) {
	if c := bodyBufClass(cap(b)); cap(b) > 0 && c < len(bodyBufs) && cap(b) == firstBodyRead<<c {
		b = b[:0]
		bodyBufs[c].Put(&b)
	}
}

// bodyRoom counts the bytes of request bodies held against a bound.
type bodyRoom struct {
	n   atomic.Int64
	max int64
}

// hold counts n more bytes, adding them to *held; false, counting nothing, when they would
// go past the bound.
func (b *bodyRoom) hold(held *int64, n int64) bool {
	if b.n.Add(n) > b.max {
		b.n.Add(-n)
		return false
	}
	*held += n
	return true
}

// release gives back the bytes of a body no longer held.
func (b *bodyRoom) release(held int64) { b.n.Add(-held) }

// setReadDeadline sets the read deadline of a request's connection, as
// http.ResponseController does (without allocating one for each request).
func setReadDeadline(w http.ResponseWriter, t time.Time) {
	for {
		switch rw := w.(type) {
		case interface{ SetReadDeadline(time.Time) error }:
			_ = rw.SetReadDeadline(t)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = rw.Unwrap()
		default:
			return
		}
	}
}

func (s *Server) handleIngest(w http.ResponseWriter, r *http.Request) {
	body, done, ok := s.beginIngest(w, r)
	if !ok {
		return
	}
	defer done()
	var ord orderSpec
	var err error
	if ord.token, ord.n, _, err = parseOrderHeader(r); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	events, err := cevent.DecodeRequest(r.Header, body, s.limits)
	if err != nil {
		if ord.token != "" {
			s.orders.fail(ord.token, ord.n)
		}
		writeDecodeError(w, err)
		return
	}
	batch := cevent.RequestMode(r.Header, body) == cevent.ModeBatch
	results, ok := s.appendEvents(w, r, events, ord)
	if !ok {
		return
	}
	if batch {
		writeRaw(w, appendBatchReply(nil, results))
		return
	}
	writeJSON(w, http.StatusOK, wire.IngestReply{Cursor: results[0].Cursor.String(), Duplicate: results[0].Duplicate})
}

// A wire.BatchReply as appendBatchReply encodes it.
const (
	batchCount     = `{"` + wire.KeyCount + `":`
	batchResults   = `,"` + wire.KeyResults + `":[`
	batchDuplicate = `","` + wire.KeyDuplicate + `":`
)

// appendBatchReply appends the reply to a batch, {"count":N,"results":[{"cursor":"…",
// "duplicate":false},…]}: what encoding/json makes of a wire.BatchReply, without its cost
// per event.
func appendBatchReply(b []byte, res []eventlog.AppendResult) []byte {
	const perEvent = len(itemCursor+batchDuplicate+"false},") + 16 + 1 + 16
	b = slices.Grow(b, 32+len(res)*perEvent)
	b = append(b, batchCount...)
	b = strconv.AppendInt(b, int64(len(res)), 10)
	b = append(b, batchResults...)
	for i, r := range res {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, itemCursor...)
		b = r.Cursor.Append(b)
		if r.Duplicate {
			b = append(b, batchDuplicate+"true}"...)
		} else {
			b = append(b, batchDuplicate+"false}"...)
		}
	}
	return append(b, "]}"...)
}

func writeDecodeError(w http.ResponseWriter, err error) {
	var ce *cevent.Error
	if errors.As(err, &ce) {
		body := wire.ErrorBody{Error: ce.Msg}
		if ce.Index >= 0 {
			i := ce.Index
			body.Index = &i
		}
		if ce.Status == http.StatusUnsupportedMediaType {
			w.Header().Set("Accept-Post", "application/cloudevents+json, application/cloudevents-batch+json, any type with ce- headers")
		}
		writeJSON(w, ce.Status, body)
		return
	}
	writeError(w, http.StatusBadRequest, err.Error())
}

// orderSpec is a request's place in a sequence of ordered batches (order.go); zero for
// none.
type orderSpec struct {
	token string
	n     uint64
}

// appendEvents stores decoded events and reports their cursors; on failure it has answered.
func (s *Server) appendEvents(w http.ResponseWriter, r *http.Request, events []cevent.Event, ord orderSpec) ([]eventlog.AppendResult, bool) {
	entries := make([]eventlog.Entry, len(events))
	for i, e := range events {
		entries[i] = eventlog.Entry{Type: e.Type, Source: e.Source, ID: e.ID, JSON: e.JSON}
	}
	var res []eventlog.AppendResult
	var err error
	if ord.token != "" {
		res, err = s.appendOrdered(r.Context(), ord.token, ord.n, entries)
	} else {
		res, err = s.cfg.Store.Append(r.Context(), entries)
	}
	if err != nil {
		switch {
		case r.Context().Err() != nil:
			// The client has gone; nothing to answer.
		case isOrderRefusal(err):
			w.Header().Set(wire.HeaderOrder, wire.OrderRefused)
			writeError(w, http.StatusConflict, err.Error())
		case errors.Is(err, eventlog.ErrClosed):
			retryAfter(w, 2)
			writeError(w, http.StatusServiceUnavailable, "the node is shutting down; retry against it once it is back")
		case errors.Is(err, eventlog.ErrReadOnly):
			writeError(w, http.StatusForbidden, publicText(err.Error()))
		case errors.Is(err, eventlog.ErrRefused):
			writeError(w, http.StatusUnprocessableEntity, publicText(err.Error()))
		case errors.Is(err, eventlog.ErrUnavailable):
			s.appendsDown.fail(s.log, err)
			retryAfter(w, 2)
			writeError(w, http.StatusServiceUnavailable, "the event log cannot take events right now: "+publicText(err.Error())+"; retry after the delay given")
		default:
			// A failed log takes nothing until the node is restarted: no Retry-After, since
			// retrying cannot succeed before then.
			s.appendsFailed.fail(s.log, err)
			writeError(w, http.StatusServiceUnavailable, "the event log cannot take events until the node is restarted: "+publicText(err.Error()))
		}
		return nil, false
	}
	s.appendsDown.ok(s.log)
	s.appendsFailed.ok(s.log)
	s.metrics.ingested.Add(float64(len(res)))
	if ord.token != "" {
		w.Header().Set(wire.HeaderOrder, wire.OrderStored)
	}
	return res, true
}

func (s *Server) handleSignal(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodPost:
	case http.MethodOptions:
		cevent.HandleWebhookOptions(w, r)
		return
	default:
		w.Header().Set("Allow", "GET, POST, OPTIONS")
		writeError(w, http.StatusMethodNotAllowed, "signals are sent with POST (form or JSON) or GET (query string)")
		return
	}
	body, done, ok := s.beginIngest(w, r)
	if !ok {
		return
	}
	defer done()
	e, err := cevent.FromSignal(r.PathValue("entity"), r, body, s.limits, func() string { return uuid.NewString() })
	if err != nil {
		writeDecodeError(w, err)
		return
	}
	res, ok := s.appendEvents(w, r, []cevent.Event{e}, orderSpec{})
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, wire.IngestReply{Cursor: res[0].Cursor.String(), Duplicate: res[0].Duplicate, ID: e.ID, Type: e.Type})
}

// HTTPServer wraps s in an http.Server with limits against slow or greedy clients: headers
// must arrive within headerTimeout, bodies within Config.BodyTimeout (and a request that has
// read no body within a minute), and a reply may take the longest long-poll plus a margin.
func (s *Server) HTTPServer(addr string, headerTimeout time.Duration) *http.Server {
	if headerTimeout <= 0 {
		headerTimeout = 5 * time.Second
	}
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: headerTimeout,
		ReadTimeout:       time.Minute,
		WriteTimeout:      s.cfg.MaxWait + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
}
