package cometbft

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/internal/tmnode"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
)

// faultProxy passes TCP connections to a node, and can cut them all or refuse websocket
// upgrades: the faults a real node cannot be made to show on demand.
type faultProxy struct {
	l       net.Listener
	target  string
	refuse  atomic.Bool // close connections that ask for the websocket
	mu      sync.Mutex
	conns   map[net.Conn]bool
	wsDials atomic.Int64
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{l: l, target: strings.TrimPrefix(target, "http://"), conns: map[net.Conn]bool{}}
	t.Cleanup(func() { l.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *faultProxy) URL() string { return "http://" + p.l.Addr().String() }

func (p *faultProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.pass(c)
	}
}

func (p *faultProxy) pass(c net.Conn) {
	br := bufio.NewReader(c)
	head, _ := br.Peek(len("GET /websocket"))
	if bytes.HasPrefix(head, []byte("GET /websocket")) || bytes.HasPrefix(head, []byte("GET /v1/websock")) {
		p.wsDials.Add(1)
		if p.refuse.Load() {
			c.Close()
			return
		}
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, br); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// cut closes every connection passed so far.
func (p *faultProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// The head follower wakes waiters from the websocket; when the subscription drops and the
// websocket is refused, from status polls; and it goes back to the websocket when it can.
func TestHeadFollower(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CometBFT node")
	}
	bin := cometbfttest.Need(t, "0.38", cometbfttest.KindCometBFT)
	node := cometbfttest.Start(t, bin, cometbfttest.Config{})
	proxy := newFaultProxy(t, node.URL)
	ctx := testCtx(t)
	r, err := New(Options{Options: client.Options{Node: proxy.URL()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()

	// waitPast waits for the chain to pass the height the reader last knew.
	waitPast := func() {
		t.Helper()
		st, err := r.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.WaitHeight(ctx, st.Latest, time.Minute)
		if err != nil || got <= st.Latest {
			t.Fatalf("WaitHeight(%d) = %d, %v", st.Latest, got, err)
		}
	}
	waitPast()
	testwait.Until(t, "the follower subscribes on the websocket", func() bool { return r.Following() == FollowWebsocket })
	waitPast()

	proxy.refuse.Store(true)
	proxy.cut()
	testwait.Until(t, "the follower falls back to polling", func() bool { return r.Following() == FollowPolling })
	dials := proxy.wsDials.Load()
	for range 3 {
		waitPast()
	}
	testwait.Until(t, "the follower tries the websocket again", func() bool { return proxy.wsDials.Load() > dials })
	if r.Following() != FollowPolling {
		t.Fatalf("following by %s while the websocket is refused", r.Following())
	}

	proxy.refuse.Store(false)
	testwait.Until(t, "the follower is back on the websocket", func() bool { return r.Following() == FollowWebsocket })

	// An HTTP client with a timeout, for the calls, does not keep the follower off the
	// websocket, whose subscription outlasts any call.
	timed := newReader(t, node, Options{Options: client.Options{HTTPClient: &http.Client{Timeout: 30 * time.Second}}})
	if _, err := timed.WaitHeight(ctx, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "a follower with a timed HTTP client subscribes", func() bool { return timed.Following() == FollowWebsocket })
	waitPast()
	r.head.mu.Lock()
	sessions, drops := r.head.sessions, r.head.drops
	r.head.mu.Unlock()
	if sessions != 2 || drops != 1 {
		t.Errorf("%d websocket sessions, %d dropped; want 2 and 1", sessions, drops)
	}
}

// A forward page that waits returns as soon as a new height holds a matching item, and an
// empty page when the wait ends first.
func TestForwardWaits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a CometBFT node")
	}
	bin := cometbfttest.Need(t, "0.38", cometbfttest.KindCometBFT)
	node := cometbfttest.Start(t, bin, cometbfttest.Config{TimeoutCommit: time.Second})
	ctx := testCtx(t)
	r := newReader(t, node, Options{})
	newest, err := r.Newest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Forward(ctx, PageRequest{After: EndOf(newest.Height), Wait: time.Minute})
	if err != nil || len(p.Items) == 0 || p.Items[0].Cursor != (Position{Height: newest.Height + 1}).String() {
		t.Fatalf("Forward after the newest height: %+v, %v", p, err)
	}
	// Nothing matches: the page comes back empty when the wait ends, its Next at the end of
	// the heights it examined.
	q, err := filter.Compile("tm.event = 'Tx' AND app.key = 'never'")
	if err != nil {
		t.Fatal(err)
	}
	prev := p.Next
	p, err = r.Forward(ctx, PageRequest{After: prev, Query: q, Wait: 1500 * time.Millisecond})
	if err != nil || len(p.Items) != 0 || p.Next.Compare(prev) < 0 || p.Next.Index != EndIndex {
		t.Fatalf("Forward with a query nothing matches, after %v: %+v, %v", prev, p, err)
	}
}

// Detect tells a CometBFT node from what is not one.
func TestDetectRefuses(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<html><body>404 page not found</body></html>", http.StatusNotFound)
	}))
	defer page.Close()
	_, err := Detect(ctx, Options{Options: client.Options{Node: page.URL}})
	var nc *NotCometBFTError
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), "404") {
		t.Errorf("a web server: %v", err)
	}
	if testing.Short() {
		return
	}
	// A Tendermint node of the v0.36 line answers status, and serves the events method.
	tm := tmnode.Start(t, "create-empty-blocks=false")
	_, err = Detect(ctx, Options{Options: client.Options{Node: tm.URL}})
	if !errors.As(err, &nc) || !strings.Contains(err.Error(), "serves the events method") {
		t.Errorf("a Tendermint node: %v", err)
	}
}

// Where /websocket is not served, the follower subscribes at /v1/websocket (which CometBFT
// v1 serves beside it).
func TestHeadFollowerV1Path(t *testing.T) {
	t.Parallel()
	ctx := testCtx(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/websocket", http.NotFound)
	mux.HandleFunc("/v1/websocket", func(w http.ResponseWriter, req *http.Request) {
		c, err := websocket.Accept(w, req, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		if _, _, err := c.Read(ctx); err != nil { // the subscribe request
			return
		}
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`))
		_ = c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"result":{"query":"tm.event='NewBlockHeader'","data":{"type":"tendermint/event/NewBlockHeader","value":{"header":{"height":"7","time":"2026-11-28T06:44:40.540941083Z"}}}}}`))
		<-req.Context().Done()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"node_info":{"network":"c","version":"1.0.1"},"sync_info":{"latest_block_height":"5","earliest_block_height":"1","latest_block_time":"2026-11-28T06:44:39.5Z","catching_up":false}}}`))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r, err := New(Options{Options: client.Options{Node: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h, err := r.WaitHeight(ctx, 6, time.Minute); err != nil || h != 7 {
		t.Fatalf("WaitHeight(6) = %d, %v; want 7 from the websocket", h, err)
	}
	if r.Following() != FollowWebsocket {
		t.Fatalf("following by %s", r.Following())
	}
}
