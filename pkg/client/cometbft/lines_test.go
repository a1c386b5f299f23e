package cometbft

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/filter"
)

// TestLines runs the reader against real nodes of each CometBFT line, the lines side by
// side, each line's nodes shared by its subtests.
func TestLines(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts CometBFT nodes")
	}
	for _, line := range cometbfttest.Lines {
		t.Run(line, func(t *testing.T) {
			t.Parallel()
			n := startLine(t, line)
			// The tests that read a chain from its oldest height run together first, the burst of
			// thousands of transactions on the same chain after them, so that they read a few
			// hundred small blocks whichever starts first.
			t.Run("Reads", func(t *testing.T) {
				t.Run("Detect", func(t *testing.T) { t.Parallel(); testDetect(t, n) })
				t.Run("Walk", func(t *testing.T) { t.Parallel(); testWalk(t, n.val, 12) })
				t.Run("WalkBlockEvents", func(t *testing.T) { t.Parallel(); testWalk(t, n.kv, 6) })
				t.Run("SecondEndpoint", func(t *testing.T) { t.Parallel(); testSecondEndpoint(t, n) })
				t.Run("Prune", func(t *testing.T) { t.Parallel(); testPrune(t, n.prune) })
				t.Run("Discard", func(t *testing.T) { t.Parallel(); testDiscard(t, n.discard) })
				t.Run("Filter", func(t *testing.T) { t.Parallel(); testFilter(t, n.kv) })
				t.Run("Since", func(t *testing.T) { t.Parallel(); testSince(t, n.kv) })
				t.Run("Compare", func(t *testing.T) { t.Parallel(); testCompare(t, n.kv) })
				if n.companion != nil {
					t.Run("Companion", func(t *testing.T) { t.Parallel(); testCompanion(t, n.companion) })
				}
			})
			t.Run("Burst", func(t *testing.T) { testBurst(t, n.val, 2000) })
		})
	}
}

func testDetect(t *testing.T, n *lineNodes) {
	ctx := testCtx(t)
	st, err := Detect(ctx, Options{Options: client.Options{Node: n.val.URL}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Line{"0.37": Line037, "0.38": Line038, "1.0": Line1}[n.line]
	if st.Line != want || st.ChainID == "" || st.Latest < 1 {
		t.Fatalf("Detect = %+v, want line %s", st, want)
	}
}

// testWalk sends transactions, then walks the node forward in small pages and back, and
// compares both walks with what the checker reads, item for item.
func testWalk(t *testing.T, node *cometbfttest.Node, txs int) {
	ctx := testCtx(t)
	to := sendTxs(t, ctx, node, "walk", txs)
	r := newReader(t, node, Options{Concurrency: 3})
	oldest, err := r.Oldest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	items := walkForward(t, ctx, r, Position{}, to, 7)
	checkItems(t, ctx, node, items, oldest.Height, to)

	// Back from the end of height to, in pages of 5, newest first.
	var back []client.Item
	before := Position{Height: to + 1}
	for {
		p, err := r.Backward(ctx, PageRequest{Before: before, Max: 5})
		if err != nil {
			t.Fatal(err)
		}
		back = append(back, p.Items...)
		if !p.More {
			break
		}
		before = p.Next
	}
	slices.Reverse(back)

	// A position past a height's last item (made up, or of another chain) reads on from the
	// next height; one that is no position is refused.
	p, err := r.Forward(ctx, PageRequest{After: Position{Height: oldest.Height, Index: 500}, Max: 1})
	if err != nil || len(p.Items) != 1 || p.Items[0].Cursor != (Position{Height: oldest.Height + 1}).String() {
		t.Fatalf("Forward after item 500 of height %d: %+v, %v", oldest.Height, p, err)
	}
	for _, bad := range []Position{{Height: oldest.Height, Index: -2}, {Height: -1}, {Height: MaxHeight + 1}} {
		if _, err := r.Forward(ctx, PageRequest{After: bad}); !errors.Is(err, ErrCursor) {
			t.Errorf("Forward after %+v: %v, want an ErrCursor", bad, err)
		}
		if _, err := r.Backward(ctx, PageRequest{Before: bad}); !errors.Is(err, ErrCursor) {
			t.Errorf("Backward before %+v: %v, want an ErrCursor", bad, err)
		}
	}
	if len(back) != len(items) {
		t.Fatalf("back: %d items, forward: %d", len(back), len(items))
	}
	for i := range back {
		if string(back[i].Raw) != string(items[i].Raw) {
			t.Fatalf("item %d back %s, forward %s", i, back[i].Raw, items[i].Raw)
		}
	}
	t.Logf("%d items of heights %d to %d", len(items), oldest.Height, to)
}

// testSecondEndpoint reads the chain from the validator and from a full node peered with it:
// the same items, cursors and all, and a position taken on one resumes on the other.
func testSecondEndpoint(t *testing.T, n *lineNodes) {
	ctx := testCtx(t)
	to := sendTxs(t, ctx, n.val, "second", 8)
	if err := n.full.WaitHeight(ctx, to); err != nil {
		t.Fatal(err)
	}
	rv := newReader(t, n.val, Options{})
	rf := newReader(t, n.full, Options{Concurrency: 2})
	onVal := walkForward(t, ctx, rv, Position{}, to, 4)
	onFull := walkForward(t, ctx, rf, Position{}, to, 9)
	if len(onVal) != len(onFull) || len(onVal) == 0 {
		t.Fatalf("%d items on the validator, %d on the full node", len(onVal), len(onFull))
	}
	for i := range onVal {
		if string(onVal[i].Raw) != string(onFull[i].Raw) {
			t.Fatalf("item %d: validator %s, full node %s", i, onVal[i].Raw, onFull[i].Raw)
		}
	}
	// A reader that stopped on the validator at a transaction resumes on the full node.
	k := len(onVal) - 3
	for onVal[k].Event != EventTx {
		k--
	}
	at, err := ParseCursor(onVal[k].Cursor)
	if err != nil {
		t.Fatal(err)
	}
	rest := walkForward(t, ctx, newReader(t, n.full, Options{}), at, to, 100)
	if len(rest) != len(onVal)-k-1 || string(rest[0].Raw) != string(onVal[k+1].Raw) {
		t.Fatalf("resumed on the full node after %s: %d items, want %d", at, len(rest), len(onVal)-k-1)
	}

	// The chain's identity at a height is the same on both; another chain's is refused, and
	// so is another block at the height (a chain rolled back and rebuilt).
	id, err := rv.IdentityAt(ctx, at.Height)
	if err != nil {
		t.Fatal(err)
	}
	if checked, err := rf.CheckIdentity(ctx, id); !checked || err != nil {
		t.Fatalf("CheckIdentity(%+v) on the full node = %v, %v", id, checked, err)
	}
	var mismatch *ChainMismatchError
	if _, err := newReader(t, n.kv, Options{}).CheckIdentity(ctx, id); !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "serves chain") {
		t.Fatalf("CheckIdentity on another chain: %v", err)
	}
	other := id
	other.BlockHash = strings.Repeat("AB", 32)
	if checked, err := rf.CheckIdentity(ctx, other); !checked || !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "rolled back") {
		t.Fatalf("CheckIdentity with another block: %v, %v", checked, err)
	}
}

// testBurst sends a burst of transactions at once, blocks of thousands, while a reader
// follows the head and a websocket subscriber listens: the reader delivers each exactly
// once; the node cancels the subscription.
func testBurst(t *testing.T, node *cometbfttest.Node, n int) {
	ctx := testCtx(t)
	r := newReader(t, node, Options{})
	start, err := r.Newest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := subscribe(t, ctx, node, "tm.event='Tx'")
	q, err := filter.Compile("tm.event = 'Tx'")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	delivered := 0
	done := make(chan error, 1)
	go func() {
		after := start
		for delivered < n {
			p, err := r.Forward(ctx, PageRequest{After: after, Max: 500, Query: q, Wait: 2 * time.Second})
			if err != nil {
				done <- err
				return
			}
			for _, it := range p.Items {
				tx, _ := base64.StdEncoding.DecodeString(gjson.GetBytes(it.Data, "value.tx").Str)
				if strings.HasPrefix(string(tx), "burst") {
					seen[string(tx)]++
					delivered++
				}
			}
			after = p.Next
		}
		done <- nil
	}()
	var txs []string
	for i := range n {
		txs = append(txs, fmt.Sprintf("burst%d=%d", i, i))
	}
	if err := node.BroadcastAsync(ctx, txs, 8); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, tx := range txs {
		if seen[tx] != 1 {
			t.Fatalf("%s delivered %d times", tx, seen[tx])
		}
	}
	if delivered != n {
		t.Fatalf("%d delivered, want %d", delivered, n)
	}
	got, ended := cometbfttest.CountTxs(ws, 2*time.Second)
	t.Logf("the reader delivered all %d transactions once; the websocket subscriber got %d, then: %s", n, got, ended)
	if got >= n || !strings.Contains(ended, "subscription was canceled") {
		t.Errorf("the websocket subscriber got %d of %d and ended with %q: it was not cancelled", got, n, ended)
	}
}

// testPrune stops a reader while the node prunes past it: the next page reports the lost
// heights, and the reader goes on from the oldest.
func testPrune(t *testing.T, node *cometbfttest.Node) {
	ctx := testCtx(t)
	r := newReader(t, node, Options{})
	// The reader reads height h0, the newest.
	newest, err := r.Newest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h0 := newest.Height
	p, err := r.Forward(ctx, PageRequest{After: EndOf(h0 - 1)})
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := ParseCursor(p.Items[0].Cursor); first != (Position{Height: h0}) {
		t.Fatalf("read %v, not height %d", first, h0)
	}
	testwait.Until(t, "the node prunes past the reader", func() bool {
		st, err := node.Status()
		return err == nil && st.Earliest > h0+2
	})
	for _, after := range []Position{EndOf(h0), {Height: h0, Index: 0}} {
		e0, _ := node.Status()
		_, err := r.Forward(ctx, PageRequest{After: after})
		e1, _ := node.Status()
		var gap *GapError
		if !errors.As(err, &gap) {
			t.Fatalf("Forward after %v: %v, want a gap", after, err)
		}
		from, _ := next(after)
		if gap.From != from || gap.To != gap.Oldest.Height-1 || gap.Oldest.Height < e0.Earliest || gap.Oldest.Height > e1.Earliest || gap.After != after {
			t.Fatalf("after %v: %+v; the node's lowest height was %d, then %d", after, gap, e0.Earliest, e1.Earliest)
		}
		if !strings.Contains(gap.Error(), fmt.Sprintf("heights %d to %d", gap.From, gap.To)) {
			t.Errorf("gap error %q does not name the heights", gap)
		}
	}
	// Resumed after the gap, the reader starts at the oldest height (unless the node pruned
	// it meanwhile: then that is a gap again).
	for range 5 {
		_, err := r.Forward(ctx, PageRequest{After: EndOf(h0)})
		var gap *GapError
		if !errors.As(err, &gap) {
			t.Fatal(err)
		}
		p, err := r.Forward(ctx, PageRequest{After: gap.Resume()})
		if errors.As(err, &gap) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if first, _ := ParseCursor(p.Items[0].Cursor); first != gap.Oldest {
			t.Fatalf("resumed at %v, want %v", first, gap.Oldest)
		}
		return
	}
	t.Fatal("the node pruned faster than the reader resumed, five times")
}

// testDiscard: a node that keeps no block results is refused at once, for good.
func testDiscard(t *testing.T, node *cometbfttest.Node) {
	ctx := testCtx(t)
	_, err := Detect(ctx, Options{Options: client.Options{Node: node.URL}})
	var de *DiscardError
	if !errors.As(err, &de) || client.Retryable(err) {
		t.Fatalf("Detect: %v (retryable %v), want a DiscardError", err, client.Retryable(err))
	}
	if !strings.Contains(err.Error(), "discard_abci_responses = true") {
		t.Errorf("the error does not say what to change: %v", err)
	}
	r := newReader(t, node, Options{})
	if _, err := r.Forward(ctx, PageRequest{}); !errors.As(err, &de) {
		t.Fatalf("Forward: %v, want a DiscardError", err)
	}
}

// testFilter: a query over a transaction's attributes matches across its ABCI events, as
// the node's own subscription does (and unlike its tx_search); block items match on their
// events and block.height.
func testFilter(t *testing.T, node *cometbfttest.Node) {
	ctx := testCtx(t)
	const query = "tm.event='Tx' AND app.key='blue2' AND app.creator='Cosmoshi Netowoko'"
	ws := subscribe(t, ctx, node, query)
	h, err := node.BroadcastCommit(ctx, "color2=blue2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := node.BroadcastCommit(ctx, "color3=red3"); err != nil {
		t.Fatal(err)
	}
	q, err := filter.Compile(query)
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, node, Options{})
	var got []client.Item
	for after := EndOf(h - 3); after.Compare(EndOf(h+2)) < 0; {
		p, err := r.Forward(ctx, PageRequest{After: after, Query: q, Wait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got, after = append(got, p.Items...), p.Next
	}
	blue := base64.StdEncoding.EncodeToString([]byte("color2=blue2"))
	if len(got) != 1 || got[0].Cursor[:13] != (Position{Height: h}).String()[:13] || gjson.GetBytes(got[0].Data, "value.tx").Str != blue {
		var cursors []string
		for _, it := range got {
			cursors = append(cursors, it.Cursor)
		}
		t.Fatalf("the query matched %d items %v, want the transaction color2=blue2 at height %d", len(got), cursors, h)
	}
	select {
	case ev := <-ws:
		if ev.Err != "" || ev.Data.Get("value.TxResult.tx").Str != blue {
			t.Fatalf("the node's subscription: %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the node's subscription did not match the transaction")
	}
	var search struct {
		Result struct {
			Total string `json:"total_count"`
		} `json:"result"`
	}
	err = node.Get(ctx, "tx_search", url.Values{"query": {`"app.key='blue2' AND app.creator='Cosmoshi Netowoko'"`}}, &search)
	switch {
	case err != nil && strings.Contains(err.Error(), "indexing is disabled"):
	case err != nil:
		t.Fatal(err)
	case search.Result.Total != "0":
		t.Errorf("tx_search matched %s transactions across events; it was expected to match within one only", search.Result.Total)
	}

	// Block items: the kvstore's block events say foo=100 at every other height.
	blocks, err := filter.Compile("tm.event = 'NewBlockEvents' AND begin_event.foo = 100 AND block.height <= " + strconv.FormatInt(h, 10))
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.Forward(ctx, PageRequest{After: EndOf(h - 6), Query: blocks, Heights: 6})
	if err != nil {
		t.Fatal(err)
	}
	var heights []int64
	for _, it := range p.Items {
		pos, _ := ParseCursor(it.Cursor)
		heights = append(heights, pos.Height)
	}
	var want []int64
	for x := h - 5; x <= h; x++ {
		type event struct {
			Type       string
			Attributes []struct{ Key, Value string }
		}
		var res struct {
			Result struct {
				Finalize []event `json:"finalize_block_events"`
				Begin    []event `json:"begin_block_events"`
				End      []event `json:"end_block_events"`
			}
		}
		if err := node.Get(ctx, "block_results", url.Values{"height": {strconv.FormatInt(x, 10)}}, &res); err != nil {
			t.Fatal(err)
		}
		for _, ev := range slices.Concat(res.Result.Finalize, res.Result.Begin, res.Result.End) {
			if ev.Type == "begin_event" && slices.Contains(ev.Attributes, struct{ Key, Value string }{"foo", "100"}) {
				want = append(want, x)
				break
			}
		}
	}
	if !slices.Equal(heights, want) || p.Next != EndOf(h) {
		t.Fatalf("block items at %v (next %v), want at %v", heights, p.Next, want)
	}
}

// testSince finds heights by their blocks' times.
func testSince(t *testing.T, node *cometbfttest.Node) {
	ctx := testCtx(t)
	r := newReader(t, node, Options{})
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h := st.Latest - 3
	at, err := r.BlockTime(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{at, h}, {at.Add(-time.Nanosecond), h}, {at.Add(time.Nanosecond), h + 1},
		{time.Unix(0, 0), st.Earliest},
	} {
		got, err := r.HeightAt(ctx, tc.t)
		if err != nil || got != tc.want {
			t.Errorf("HeightAt(%v) = %d, %v; want %d", tc.t, got, err, tc.want)
		}
	}
	// After the newest block: the height after the newest, whichever it is by then.
	if got, err := r.HeightAt(ctx, time.Now().Add(time.Hour)); err != nil || got <= st.Latest {
		t.Errorf("HeightAt(an hour from now) = %d, %v; want above %d", got, err, st.Latest)
	} else if st2, err := r.Status(ctx); err != nil || got > st2.Latest+1 {
		t.Errorf("HeightAt(an hour from now) = %d, the latest then %d (%v)", got, st2.Latest, err)
	}
	if p, err := r.Since(ctx, at); err != nil || p != EndOf(h-1) {
		t.Errorf("Since(%v) = %v, %v; want %v", at, p, err, EndOf(h-1))
	}
	if p, err := r.Since(ctx, time.Unix(0, 0)); err != nil || !p.IsZero() {
		t.Errorf("Since(1970) = %v, %v; want the oldest", p, err)
	}
}

// testCompanion: a v1 node whose data companion pruned block results it keeps the blocks
// of: the oldest height is found above what status shows, and a reader below it is told.
func testCompanion(t *testing.T, node *cometbfttest.Node) {
	ctx := testCtx(t)
	if err := node.WaitHeight(ctx, companionRetain+3); err != nil {
		t.Fatal(err)
	}
	node.Stop()
	if err := node.Configure(cometbfttest.CompanionSettings(1, companionRetain)); err != nil {
		t.Fatal(err)
	}
	if err := node.Restart(); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, "the companion's pruning", func() bool {
		err := node.Get(ctx, "block_results", url.Values{"height": {"1"}}, nil)
		return err != nil && strings.Contains(err.Error(), "could not find results")
	})
	st, err := node.Status()
	if err != nil {
		t.Fatal(err)
	}
	r := newReader(t, node, Options{})
	oldest, err := r.Oldest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if oldest != (Position{Height: companionRetain}) || st.Earliest >= companionRetain {
		t.Fatalf("oldest %v, want height %d (status says %d)", oldest, companionRetain, st.Earliest)
	}
	_, err = r.Forward(ctx, PageRequest{After: EndOf(3)})
	var gap *GapError
	if !errors.As(err, &gap) || gap.From != 4 || gap.To != companionRetain-1 {
		t.Fatalf("Forward after height 3: %v", err)
	}
	p, err := r.Forward(ctx, PageRequest{})
	if err != nil || p.Items[0].Cursor != oldest.String() {
		t.Fatalf("Forward from the start: %v, %v", p, err)
	}
}

// testCompare runs CompareRead over the node's heights: both sides read every height and
// count the same items and events. (How fast each is, is for benchmarks: it is logged.)
func testCompare(t *testing.T, node *cometbfttest.Node) {
	ctx := testCtx(t)
	to := sendTxs(t, ctx, node, "compare", 20)
	c, err := CompareRead(ctx, Options{Options: client.Options{Node: node.URL}, Concurrency: 4}, 1, to, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Reader.Items != c.Plain.Items || c.Reader.Events != c.Plain.Events || c.Reader.Heights != to || c.Reader.Events == 0 {
		t.Fatalf("the reader read %+v, the plain loop %+v", c.Reader, c.Plain)
	}
	t.Logf("heights 1 to %d, %d items, %d events: reader %.0f heights/s, plain loop %.0f heights/s (%.2f×)",
		to, c.Reader.Items, c.Reader.Events, c.Reader.HeightsPerSecond(), c.Plain.HeightsPerSecond(), c.Ratio())
}
