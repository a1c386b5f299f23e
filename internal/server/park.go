package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/evtctl/evtctl/internal/parker"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Long-polls parked out of net/http (package parker): the events method's side of them.
// The parker holds the connections of waiting calls and reads their requests; what a
// request asks, and the replies, are the Server's (parkedCall).

// parking is a Server's parker, with what the Server keeps for its replies.
type parking struct {
	p    *parker.Parker
	date atomic.Pointer[dateLine]

	rpcOK, getOK   prometheus.Counter
	rpcLat, getLat prometheus.Observer
}

// parking returns the Server's parking, started at the first call; nil where connections
// cannot be watched, or once the Server has shut down.
func (s *Server) parking() *parking {
	s.parkOnce.Do(func() {
		if pk := s.newParking(nil); pk != nil {
			s.park.Store(pk)
		}
	})
	return s.park.Load()
}

// newParking starts a parker for s whose connections poll watches (nil: its own), or
// returns nil where connections cannot be watched.
func (s *Server) newParking(poll parker.Poller) *parking {
	pk := &parking{
		rpcOK:  s.metrics.requests.WithLabelValues("rpc", "200"),
		getOK:  s.metrics.requests.WithLabelValues("events_get", "200"),
		rpcLat: s.metrics.latency.WithLabelValues("rpc"),
		getLat: s.metrics.latency.WithLabelValues("events_get"),
	}
	p, err := parker.New(parker.Config{
		NewCall: func() parker.Call { return &parkedCall{s: s, pk: pk} },
		Logger:  s.log,
		Poller:  poll,
	})
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			s.log.Warn("long-polls will wait in goroutines: cannot watch connections", "err", err)
		}
		return nil
	}
	pk.p = p
	return pk
}

// Attach wraps ln so that long-polls on its connections are parked while they wait (see
// package parker), and sets up hs, which serves s, to serve them: serve hs on the listener
// it returns (hs.Serve(s.Attach(hs, ln))). hs's timeouts apply to the connections the parker
// holds: ReadHeaderTimeout before a connection's first request, IdleTimeout between
// requests, WriteTimeout to a reply. TLS is served as before, through net/http: serve a
// listener Attach has not wrapped. Where connections cannot be watched (not Linux), Attach
// returns ln as it is.
func (s *Server) Attach(hs *http.Server, ln net.Listener) net.Listener {
	pk := s.parking()
	if pk == nil {
		return ln
	}
	hs.RegisterOnShutdown(func() { _ = s.Shutdown(context.Background()) })
	return pk.p.Attach(hs, ln)
}

// call is a long-poll being served on a parked connection.
type call struct {
	pl    *poll
	id    json.RawMessage // of a JSON-RPC call
	get   bool            // GET /events, else a JSON-RPC call
	start time.Time       // when the request came
	due   time.Time       // when its wait runs out
}

// parkedCall is the events method's side of the calls on a connection the parker holds
// (parker.Call): one call at a time, whose state it holds in place.
type parkedCall struct {
	s    *Server
	pk   *parking
	call call
	poll poll // what call.pl points to for the calls Serve reads, one after another
}

// Serve answers a request the parker read, counts its call among the waiters, or leaves it
// to net/http, which words refusals and errors.
func (pc *parkedCall) Serve(ctx context.Context, req *parker.Request, inline, closeAfter bool, out []byte) ([]byte, parker.Outcome) {
	s := pc.s
	c := call{get: req.Get, start: req.Start}
	if s.readToken != nil && !tokenIs(bearerOf(req.Auth), *s.readToken) {
		return out, parker.Declined
	}
	var p *eventsParams
	if req.Get {
		values, err := url.ParseQuery(string(req.Query))
		if err != nil {
			return out, parker.Declined
		}
		pp, err := paramsFromQuery(values)
		if err != nil {
			return out, parker.Declined
		}
		p = &pp
	} else {
		body := bytes.TrimSpace(req.Body)
		if len(body) > 0 && body[0] == '[' {
			return out, parker.Declined // a batch
		}
		id, pp, isCall, _ := decodeCallValue(body)
		if !isCall {
			return out, parker.Declined // errors and notifications
		}
		c.id, p = id, &pp
	}
	pl, rerr := s.initPoll(&pc.poll, ctx, p, callBudget{reply: s.cfg.MaxReplyBytes, force: true})
	if rerr != nil {
		return out, parker.Declined
	}
	var res result
	var done bool
	if inline {
		if !s.waitsAtOnce(pl) {
			return out, parker.Later
		}
	} else {
		res, rerr, done = s.pollOnce(ctx, pl, false)
	}
	if !done {
		if rerr = s.countWaiter(pl); rerr == nil {
			c.pl, c.due = pl, c.start.Add(pl.wait)
			pc.call = c
			return out, parker.Waits
		}
	}
	s.endPoll(pl)
	return pc.compose(out, &c, res, rerr, closeAfter), parker.Answered
}

// Wake reads again for the waiting call after the head moved: its answer, or it waits on
// (until its wait runs out: then it answers with what it has).
func (pc *parkedCall) Wake(ctx context.Context, closeAfter bool, out []byte) ([]byte, parker.Outcome) {
	s := pc.s
	res, rerr, done := s.pollOnce(ctx, pc.call.pl, true)
	if !done {
		if time.Now().Before(pc.call.due) {
			return out, parker.Waits
		}
		res = s.emptyPage(pc.call.pl)
	}
	return pc.end(out, res, rerr, closeAfter), parker.Answered
}

// Expire answers the waiting call with what it has.
func (pc *parkedCall) Expire(closeAfter bool, out []byte) []byte {
	return pc.end(out, pc.s.emptyPage(pc.call.pl), nil, closeAfter)
}

// HangUp ends the waiting call, counted as net/http counts a request whose client went away.
func (pc *parkedCall) HangUp() {
	c := pc.call
	pc.call = call{}
	pc.s.endPoll(c.pl)
	pc.observe(&c, time.Now())
}

// Waits says what the waiting call waits for.
func (pc *parkedCall) Waits() (<-chan struct{}, time.Time) { return pc.call.pl.changed, pc.call.due }

// end ends the waiting call (it no longer counts among the waiters) with its reply.
func (pc *parkedCall) end(out []byte, res result, rerr *rpcError, closeAfter bool) []byte {
	c := pc.call
	pc.call = call{}
	pc.s.endPoll(c.pl)
	return pc.compose(out, &c, res, rerr, closeAfter)
}

// compose appends the reply of c to b, releases res and counts the request.
func (pc *parkedCall) compose(b []byte, c *call, res result, rerr *rpcError, closeAfter bool) []byte {
	now := time.Now()
	b = pc.pk.appendReply(b, c, res, rerr, closeAfter, now)
	res.release()
	pc.observe(c, now)
	return b
}

// observe counts c's request, answered at now, as the metrics of net/http's requests do.
func (pc *parkedCall) observe(c *call, now time.Time) {
	if c.get {
		pc.pk.getLat.Observe(now.Sub(c.start).Seconds())
		pc.pk.getOK.Inc()
		return
	}
	pc.pk.rpcLat.Observe(now.Sub(c.start).Seconds())
	pc.pk.rpcOK.Inc()
}

// appendReply appends the HTTP response to c, as net/http writes it for the handler of the
// events method (handleRPC, handleGetEvents).
func (pk *parking) appendReply(b []byte, c *call, res result, rerr *rpcError, closeAfter bool, now time.Time) []byte {
	var ej []byte
	if rerr != nil {
		ej, _ = json.Marshal(rerr)
	}
	id := c.id
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	var n int
	switch {
	case c.get && rerr != nil:
		n = len(ej) + 1
	case c.get:
		n = len(res.b) + 1
	case rerr != nil:
		n = len(envelopeHead) + len(id) + len(envelopeError) + len(ej) + 2
	default:
		n = len(envelopeHead) + len(id) + len(envelopeResult) + len(res.b) + 2
	}
	b = append(b, "HTTP/1.1 200 OK\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, "\r\nContent-Type: "+wire.MediaJSON+"\r\n"+wire.HeaderStream+": "+wire.PathStream+"\r\n"...)
	if rerr != nil && rerr.retryAfter > 0 {
		b = append(b, wire.HeaderRetryAfter+": "...)
		b = strconv.AppendInt(b, int64(rerr.retryAfter), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Date: "...)
	b = pk.appendDate(b, now)
	if closeAfter {
		b = append(b, "\r\nConnection: close"...)
	}
	b = append(b, "\r\n\r\n"...)
	switch {
	case c.get && rerr != nil:
		b = append(b, ej...)
	case c.get:
		b = append(b, res.b...)
	case rerr != nil:
		b = append(append(append(append(append(b, envelopeHead...), id...), envelopeError...), ej...), '}')
	default:
		b = append(append(append(append(append(b, envelopeHead...), id...), envelopeResult...), res.b...), '}')
	}
	return append(b, '\n')
}

type dateLine struct {
	sec int64
	b   []byte
}

// appendDate appends the Date of a reply, formatted once a second.
func (pk *parking) appendDate(b []byte, now time.Time) []byte {
	d := pk.date.Load()
	if d == nil || d.sec != now.Unix() {
		d = &dateLine{sec: now.Unix(), b: now.UTC().AppendFormat(nil, http.TimeFormat)}
		pk.date.Store(d)
	}
	return append(b, d.b...)
}

// parkRequest takes the connection of a request whose call must wait out of net/http and
// parks the call (counted among the waiters already); false when the connection cannot be
// taken, and the caller waits for the call as before. The request's body must be read.
func (s *Server) parkRequest(w http.ResponseWriter, r *http.Request, via *parker.Listener, c call) bool {
	sw := statusWriterOf(w)
	if sw != nil {
		c.start = sw.start
	}
	if !via.Park(w, &parkedCall{s: s, pk: s.park.Load(), call: c}, r.Close, c.start) {
		return false
	}
	if sw != nil {
		sw.parked = true // the parker counts the request when it answers
	}
	return true
}

// bearerOf returns the token of an Authorization value in the Bearer scheme, as bearer does.
func bearerOf(auth []byte) string {
	scheme, token, ok := bytes.Cut(auth, []byte(" "))
	if !ok || !bytes.EqualFold(scheme, []byte("Bearer")) {
		return ""
	}
	return string(bytes.TrimLeft(token, " "))
}
