package cometbft

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/retry"
)

// The head follower learns of each new height as soon as the node commits it, to wake
// readers that wait at the head. It subscribes on the node's websocket to NewBlockHeader,
// one small message a block, which no load makes the node cancel in practice; it never
// takes data from the websocket, only the news that a height exists, and reads the height
// through block_results like any other. When the subscription cannot be made or ends (the
// node cancels it, the connection drops, or it falls silent while status shows newer
// heights), the follower polls status at about half the block time, and tries the
// websocket again after a while, waiting longer after each failure.

// Modes of the head follower.
const (
	FollowStarting  = "starting"
	FollowWebsocket = "websocket"
	FollowPolling   = "polling"
)

type head struct {
	r *Reader

	mu        sync.Mutex
	latest    int64
	at        time.Time // the latest height's block time, when known
	blockTime time.Duration
	changed   chan struct{} // closed when latest grows
	mode      string
	sessions  int // websocket subscriptions made
	drops     int // websocket subscriptions that ended
}

// Bounds of the head follower's timing.
const (
	minPoll       = 50 * time.Millisecond
	maxPoll       = 5 * time.Second
	wsRetryFirst  = time.Second
	wsRetryMax    = 30 * time.Second
	wsReadLimit   = 1 << 20
	defaultBlockT = time.Second
)

// startHead starts the head follower once.
func (r *Reader) startHead() *head {
	r.headOnce.Do(func() {
		hd := &head{r: r, changed: make(chan struct{}), mode: FollowStarting, blockTime: defaultBlockT}
		r.mu.Lock()
		r.head = hd
		r.mu.Unlock()
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			hd.run(r.bg)
		}()
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.head
}

// WaitHeight waits until the chain's latest height is above h, at most wait, and returns the
// latest height it knows of then. A wait that ends is not an error.
func (r *Reader) WaitHeight(ctx context.Context, h int64, wait time.Duration) (int64, error) {
	hd := r.startHead()
	r.mu.Lock()
	known := r.st.Latest
	r.mu.Unlock()
	if known > h {
		return known, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		latest, changed := hd.snapshot()
		if latest > h {
			return latest, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return max(latest, known), nil
		case <-ctx.Done():
			return max(latest, known), ctx.Err()
		}
	}
}

// Following reports how the head follower learns of new heights: FollowWebsocket,
// FollowPolling, or FollowStarting before it has started (it starts with the first wait).
func (r *Reader) Following() string {
	r.mu.Lock()
	hd := r.head
	r.mu.Unlock()
	if hd == nil {
		return FollowStarting
	}
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.mode
}

func (hd *head) snapshot() (int64, <-chan struct{}) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return hd.latest, hd.changed
}

// note records height h (with its block time, when known) and wakes the waiters if it is
// new.
func (hd *head) note(h int64, t time.Time) {
	hd.mu.Lock()
	if h <= hd.latest {
		hd.mu.Unlock()
		return
	}
	if !t.IsZero() && !hd.at.IsZero() && hd.latest > 0 {
		if bt := t.Sub(hd.at) / time.Duration(h-hd.latest); bt > 0 {
			hd.blockTime = min(max(bt, 10*time.Millisecond), time.Minute)
		}
	}
	hd.latest, hd.at = h, t
	close(hd.changed)
	hd.changed = make(chan struct{})
	hd.mu.Unlock()
	hd.r.noteLatest(h)
}

func (hd *head) setMode(m string) {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	hd.mode = m
	switch m {
	case FollowWebsocket:
		hd.sessions++
	case FollowPolling:
		if hd.sessions > hd.drops {
			hd.drops++
		}
	}
}

// pollInterval is about half the block time.
func (hd *head) pollInterval() time.Duration {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	return min(max(hd.blockTime/2, minPoll), maxPoll)
}

// poll reads status once and notes its height. It returns the height.
func (hd *head) poll(ctx context.Context) (int64, error) {
	st, err := hd.r.status(ctx, 0)
	if err != nil {
		return 0, err
	}
	hd.note(st.Latest, st.LatestTime)
	return st.Latest, nil
}

func (hd *head) run(ctx context.Context) {
	_, _ = hd.poll(ctx)
	wait := wsRetryFirst
	for ctx.Err() == nil {
		began := time.Now()
		err := hd.subscribe(ctx)
		if ctx.Err() != nil {
			return
		}
		hd.setMode(FollowPolling)
		if time.Since(began) > time.Minute || errors.Is(err, errSilent) {
			wait = wsRetryFirst
		}
		hd.pollFor(ctx, wait)
		wait = min(2*wait, wsRetryMax)
	}
}

// pollFor polls status at the poll interval for d.
func (hd *head) pollFor(ctx context.Context, d time.Duration) {
	end := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(end) {
		_, _ = hd.poll(ctx)
		if retry.Sleep(ctx, min(hd.pollInterval(), time.Until(end))) != nil {
			return
		}
	}
}

// errSilent is a subscription that stopped telling of heights that status shows.
var errSilent = errors.New("the websocket subscription fell silent")

// subscribe follows NewBlockHeader on the websocket until the subscription ends.
func (hd *head) subscribe(ctx context.Context) error {
	c := hd.r.c
	hdr := http.Header{"User-Agent": {c.ua}}
	if c.token != "" {
		hdr.Set("Authorization", "Bearer "+c.token)
	}
	// (A timeout of the HTTP client bounds the handshake only: the library sees to that.)
	opts := &websocket.DialOptions{HTTPClient: c.hc, HTTPHeader: hdr}
	conn, resp, err := websocket.Dial(ctx, c.wsURL, opts)
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		// Not at /websocket: v1 serves it at /v1/websocket too.
		conn, _, err = websocket.Dial(ctx, strings.TrimSuffix(c.wsURL, "/websocket")+"/v1/websocket", opts)
	}
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	conn.SetReadLimit(wsReadLimit)
	sub, _ := json.Marshal(rpcRequest{JSONRPC: "2.0", ID: 1, Method: "subscribe", Params: map[string]string{"query": "tm.event='NewBlockHeader'"}})
	if err := conn.Write(ctx, websocket.MessageText, sub); err != nil {
		return err
	}

	msgs := make(chan []byte)
	readErr := make(chan error, 1)
	readCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		for {
			_, b, err := conn.Read(readCtx)
			if err != nil {
				readErr <- err
				return
			}
			select {
			case msgs <- b:
			case <-readCtx.Done():
				readErr <- readCtx.Err()
				return
			}
		}
	}()

	subscribed := false
	for {
		// Quiet for a few blocks: look at status; heights the subscription did not tell
		// of mean it has fallen silent. (An idle chain, with empty blocks off, is quiet too.)
		quiet := time.NewTimer(max(3*hd.pollInterval()*2, 2*time.Second))
		select {
		case b := <-msgs:
			quiet.Stop()
			doc := gjson.ParseBytes(b)
			if e := doc.Get("error"); e.Exists() && e.Type != gjson.Null {
				return fmt.Errorf("the node ended the subscription: %s", e.Get("data").String())
			}
			if !subscribed {
				if doc.Get("id").Int() == 1 {
					subscribed = true
					hd.setMode(FollowWebsocket)
					_, _ = hd.poll(ctx) // a height committed before the subscription began
				}
				continue
			}
			hdrv := doc.Get("result.data.value.header")
			h, err := intField(hdrv, "height")
			if err != nil {
				continue // not a header; nothing to learn from it
			}
			t, _ := time.Parse(time.RFC3339Nano, hdrv.Get("time").String())
			hd.note(h, t)
		case err := <-readErr:
			quiet.Stop()
			return err
		case <-quiet.C:
			before, _ := hd.snapshot()
			if latest, err := hd.poll(ctx); err == nil && latest > before && subscribed {
				return errSilent
			}
		case <-ctx.Done():
			quiet.Stop()
			return ctx.Err()
		}
	}
}
