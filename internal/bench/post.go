package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/internal/retry"
	"github.com/evtctl/evtctl/pkg/wire"
)

// Content types of the CloudEvents HTTP binding.
const (
	ctStructured = cevent.MediaTypeStructured
	ctBatch      = cevent.MediaTypeBatch
)

// poster sends events to a node's ingest endpoint over keep-alive connections.
type poster struct {
	url   string
	token string
	ua    string
	hc    *http.Client
	tr    *http.Transport
}

func newPoster(t Target, version string, conns int) (*poster, error) {
	tr, err := newTransport(t, conns)
	if err != nil {
		return nil, err
	}
	return &poster{url: t.URL + wire.PathEvents, token: t.ingestToken(), ua: userAgent(version), hc: &http.Client{Transport: tr, Timeout: time.Minute}, tr: tr}, nil
}

func (p *poster) close() { p.tr.CloseIdleConnections() }

// busyError is a 429 or 503 reply: the node asks the client to come back later.
type busyError struct {
	status     int
	retryAfter time.Duration
}

func (e *busyError) Error() string { return fmt.Sprintf("node answered %d (busy)", e.status) }

// post sends one request and returns the reply of a 2xx. A 429 or 503 is a *busyError;
// any other status an error with the node's reason.
func (p *poster) post(ctx context.Context, contentType string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("User-Agent", p.ua)
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return nil, err
	}
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return reply, nil
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		ra, _ := strconv.Atoi(strings.TrimSpace(resp.Header.Get(wire.HeaderRetryAfter)))
		return nil, &busyError{status: s, retryAfter: time.Duration(ra) * time.Second}
	default:
		reason := strings.TrimSpace(string(reply))
		if r := gjson.Get(reason, wire.KeyError); r.Exists() {
			reason = r.String()
		}
		if len(reason) > 300 {
			reason = reason[:300] + "…"
		}
		return nil, fmt.Errorf("POST %s answered %d: %s", p.url, s, reason)
	}
}

// postRetry is post that waits out busy replies (counting them in busy) until ctx ends.
func (p *poster) postRetry(ctx context.Context, contentType string, body []byte, busy func()) ([]byte, error) {
	for {
		reply, err := p.post(ctx, contentType, body)
		var be *busyError
		if !errors.As(err, &be) {
			return reply, err
		}
		if busy != nil {
			busy()
		}
		if err := retry.Sleep(ctx, min(max(be.retryAfter, 50*time.Millisecond), 5*time.Second)); err != nil {
			return nil, err
		}
	}
}

// ackedCursors reads the cursors of an evtctl node's ingest reply: one for a structured
// event (a wire.IngestReply), one per event for a batch (a wire.BatchReply). It returns nil
// for a reply without cursors (another kind of CloudEvents receiver).
func ackedCursors(reply []byte) []string {
	if !gjson.ValidBytes(reply) {
		return nil
	}
	if c := gjson.GetBytes(reply, wire.KeyCursor); c.Type == gjson.String {
		return []string{c.Str}
	}
	var out []string
	gjson.GetBytes(reply, wire.KeyResults).ForEach(func(_, v gjson.Result) bool {
		out = append(out, v.Get(wire.KeyCursor).String())
		return true
	})
	return out
}
