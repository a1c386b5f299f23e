package main

// End-to-end scripts (testdata/cometbft) that run the evtctl binary against real CometBFT
// nodes of each line (v0.37, v0.38, v1.0), built and started by internal/cometbfttest: the
// nodes a chain's user points evtctl at. Each line's nodes start at once and are shared by
// that line's scripts, which run side by side; the lines run side by side too.

import (
	"bufio"
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/cometbfttest"
	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/pkg/cursor"
)

// chainNodes are the nodes of one line that its scripts share.
type chainNodes struct {
	val     *cometbfttest.Node // a validator of the kvstore with block events; blocks every 500ms
	full    *cometbfttest.Node // a full node peered with val: a second RPC endpoint of its chain
	prune   *cometbfttest.Node // another chain, that keeps only its last 5 blocks
	discard *cometbfttest.Node // keeps no block results
}

// startChain starts a line's nodes at once, for t and its subtests; it skips t when the line
// cannot be built.
func startChain(t *testing.T, line string) *chainNodes {
	t.Helper()
	var kv, cmt cometbfttest.Binary
	var errK, errC error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); kv, errK = cometbfttest.Program(line, cometbfttest.KindKVNode) }()
	go func() { defer wg.Done(); cmt, errC = cometbfttest.Program(line, cometbfttest.KindCometBFT) }()
	wg.Wait()
	for _, err := range []error{errK, errC} {
		if err != nil {
			t.Skip(err)
		}
	}
	nodes := cometbfttest.StartAll(t,
		cometbfttest.Spec{Bin: kv, Config: cometbfttest.Config{TimeoutCommit: 500 * time.Millisecond}},
		cometbfttest.Spec{Bin: kv, Config: cometbfttest.Config{Follow: cometbfttest.FollowSpec(0)}},
		cometbfttest.Spec{Bin: kv, Config: cometbfttest.Config{RetainBlocks: 5}},
		cometbfttest.Spec{Bin: cmt, Config: cometbfttest.Config{Discard: true}},
	)
	return &chainNodes{val: nodes[0], full: nodes[1], prune: nodes[2], discard: nodes[3]}
}

// TestCometBFTScripts runs the scripts of testdata/cometbft on each line, and the terminal
// UI on a chain at 80×24 (testdata/tmux/cometbft_tui.sh). A script finds the line's nodes in
// VAL (EVTCTL_NODE too), FULL, PRUNE and DISCARD, and the line in LINE.
func TestCometBFTScripts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts CometBFT nodes")
	}
	cmds := maps.Clone(scriptCmds)
	maps.Copy(cmds, map[string]func(*testscript.TestScript, bool, []string){
		"cmttx":        cmdCmtTx,
		"cmtcommit":    cmdCmtCommit,
		"cmtcursor":    cmdCmtCursor,
		"cmtburst":     cmdCmtBurst,
		"cmtcheck":     cmdCmtCheck,
		"cmttxs":       cmdCmtTxs,
		"cmtsubscribe": cmdCmtSubscribe,
		"cmtcancelled": cmdCmtCancelled,
		"cmtsync":      cmdCmtSync,
		"cmtpruned":    cmdCmtPruned,
		"cmtsince":     cmdCmtSince,
	})
	for _, line := range cometbfttest.Lines {
		t.Run(line, func(t *testing.T) {
			t.Parallel()
			n := startChain(t, line)
			params := testscript.Params{
				RequireExplicitExec: true,
				Cmds:                cmds,
				Setup: func(env *testscript.Env) error {
					if err := scriptEnv(env); err != nil {
						return err
					}
					for k, node := range map[string]*cometbfttest.Node{"VAL": n.val, "FULL": n.full, "PRUNE": n.prune, "DISCARD": n.discard} {
						env.Setenv(k, node.URL)
					}
					env.Setenv("EVTCTL_NODE", n.val.URL)
					env.Setenv("LINE", line)
					ctx, cancel := context.WithCancel(context.Background())
					if tb, ok := env.T().(testing.TB); ok {
						ctx, cancel = testwait.Context(tb, context.Background())
					}
					env.Defer(cancel)
					env.Values[cmtCtxKey{}] = ctx
					return nil
				},
			}
			// The scripts that read the chain from its oldest height run first, together; the
			// burst's thousands of transactions after them, so that what those read and check
			// stays a few hundred heights of small blocks whichever script the scheduler starts
			// first.
			all, err := filepath.Glob("../../testdata/cometbft/*.txtar")
			if err != nil || len(all) == 0 {
				t.Fatalf("no scripts in testdata/cometbft: %v", err)
			}
			const burst = "../../testdata/cometbft/burst.txtar"
			chain := slices.DeleteFunc(slices.Clone(all), func(f string) bool { return f == burst })
			if len(chain) == len(all) {
				t.Fatalf("%s is missing", burst)
			}
			t.Run("chain", func(t *testing.T) {
				params.Files = chain
				testscript.Run(t, params)
			})
			t.Run("burst", func(t *testing.T) {
				params.Files = []string{burst}
				testscript.Run(t, params)
			})
			t.Run("TUI", func(t *testing.T) {
				t.Parallel()
				testChainTUI(t, n.val)
			})
		})
	}
}

// cmtCtxKey holds, in a script's values, the context its waits end with: the test run's
// deadline, a little before it.
type cmtCtxKey struct{}

func cmtCtx(ts *testscript.TestScript) context.Context {
	if ctx, ok := ts.Value(cmtCtxKey{}).(context.Context); ok {
		return ctx
	}
	return context.Background()
}

// cmtNode is the node a command talks to: -node URL's, else EVTCTL_NODE's; args without the
// flag.
func cmtNode(ts *testscript.TestScript, args []string) (*cometbfttest.Node, []string) {
	u := ts.Getenv("EVTCTL_NODE")
	if len(args) >= 2 && args[0] == "-node" {
		u, args = args[1], args[2:]
	}
	return &cometbfttest.Node{URL: u}, args
}

// cmdCmtTx sends N transactions PREFIXi=vi (see cometbfttest.Node.SendTxs: blocks of one and
// of many) and sets VAR (default H) to the height by which all are committed.
//
//	cmttx [-node URL] PREFIX N [VAR]
func cmdCmtTx(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: cmttx [-node URL] PREFIX N [VAR]")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	h, err := node.SendTxs(cmtCtx(ts), args[0], n)
	ts.Check(err)
	name := "H"
	if len(args) == 3 {
		name = args[2]
	}
	ts.Setenv(name, strconv.FormatInt(h, 10))
}

// cmdCmtCommit sends one transaction and waits until a block holds it; VAR (default H) is
// set to its height.
//
//	cmtcommit [-node URL] TX [VAR]
func cmdCmtCommit(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: cmtcommit [-node URL] TX [VAR]")
	}
	h, err := node.BroadcastCommit(cmtCtx(ts), args[0])
	ts.Check(err)
	name := "H"
	if len(args) == 2 {
		name = args[1]
	}
	ts.Setenv(name, strconv.FormatInt(h, 10))
}

// cmdCmtCursor sets VAR to the cursor of item INDEX of height HEIGHT; INDEX end is the
// position after the height's last item.
//
//	cmtcursor VAR HEIGHT INDEX|end
func cmdCmtCursor(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: cmtcursor VAR HEIGHT INDEX|end")
	}
	h, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	i := int64(99_999_999)
	if args[2] != "end" {
		i, err = strconv.ParseInt(args[2], 10, 64)
		ts.Check(err)
	}
	ts.Setenv(args[0], fmt.Sprintf("h%012d.%08d", h, i))
}

// cmdCmtBurst sends N transactions PREFIXi=i at once with broadcast_tx_async from 8 workers:
// blocks of thousands.
//
//	cmtburst [-node URL] PREFIX N
func cmdCmtBurst(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmtburst [-node URL] PREFIX N")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	txs := make([]string, n)
	for i := range txs {
		txs[i] = fmt.Sprintf("%s%d=%d", args[0], i, i)
	}
	ts.Check(node.BroadcastAsync(cmtCtx(ts), txs, 8))
}

// readLines reads a file of JSON lines (or the last stdout).
func readLines(ts *testscript.TestScript, file string) [][]byte {
	var out [][]byte
	sc := bufio.NewScanner(strings.NewReader(ts.ReadFile(file)))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, append([]byte(nil), sc.Bytes()...))
	}
	ts.Check(sc.Err())
	return out
}

// cmdCmtCheck checks files of items (JSON lines, as evtctl writes them), one after the
// other, against what the checker reads of the node: from item 0 of the first item's height to the end of the last
// item's height, item for item, none missing or repeated. -from H: the first height must be
// H (oldest: the node's lowest height); -through H: the items must reach height H at least.
//
//	cmtcheck [-node URL] [-from H|oldest] [-through H] FILE...
func cmdCmtCheck(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	var from, through string
	for len(args) > 2 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-from":
			from = args[1]
		case "-through":
			through = args[1]
		default:
			ts.Fatalf("cmtcheck: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if neg || len(args) < 1 {
		ts.Fatalf("usage: cmtcheck [-node URL] [-from H|oldest] [-through H] FILE...")
	}
	var items [][]byte
	for _, f := range args {
		items = append(items, readLines(ts, f)...)
	}
	if len(items) == 0 {
		ts.Fatalf("cmtcheck: %s hold no items", strings.Join(args, ", "))
	}
	first, err := cometbfttest.HeightOf(gjson.GetBytes(items[0], "cursor").String())
	ts.Check(err)
	last, err := cometbfttest.HeightOf(gjson.GetBytes(items[len(items)-1], "cursor").String())
	ts.Check(err)
	switch from {
	case "":
	case "oldest":
		st, err := node.Status()
		ts.Check(err)
		if first != st.Earliest {
			ts.Fatalf("cmtcheck: the items begin at height %d, not at the node's lowest, %d", first, st.Earliest)
		}
	default:
		if want, err := strconv.ParseInt(from, 10, 64); err != nil || first != want {
			ts.Fatalf("cmtcheck: the items begin at height %d, not %s", first, from)
		}
	}
	if through != "" {
		if want, err := strconv.ParseInt(through, 10, 64); err != nil || last < want {
			ts.Fatalf("cmtcheck: the items end at height %d, before %s", last, through)
		}
	}
	if err := cometbfttest.CheckItems(cmtCtx(ts), node, items, first, last); err != nil {
		ts.Fatalf("cmtcheck: %v", err)
	}
	ts.Logf("%d items of heights %d to %d, as the node holds them", len(items), first, last)
}

// cmdCmtTxs checks that a file of items holds each transaction PREFIXi=… (i from 0 to N-1)
// exactly once, and no other transaction of PREFIX.
//
//	cmttxs PREFIX N FILE
func cmdCmtTxs(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: cmttxs PREFIX N FILE")
	}
	prefix := args[0]
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	seen := map[int]int{}
	for _, l := range readLines(ts, args[2]) {
		tx, err := base64.StdEncoding.DecodeString(gjson.GetBytes(l, "data.value.tx").String())
		ts.Check(err)
		k, _, _ := strings.Cut(string(tx), "=")
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(rest)
		if err != nil || i < 0 || i >= n {
			ts.Fatalf("cmttxs: a transaction %q that was not sent", tx)
		}
		seen[i]++
	}
	for i := range n {
		if seen[i] != 1 {
			ts.Fatalf("cmttxs: transaction %s%d delivered %d times", prefix, i, seen[i])
		}
	}
	ts.Logf("each of the %d transactions once", n)
}

// subscriptions holds the scripts' websocket subscribers, by script and name.
var subscriptions sync.Map // subKey → <-chan cometbfttest.WSEvent

type subKey struct {
	ts   *testscript.TestScript
	name string
}

// cmdCmtSubscribe subscribes to QUERY on the node's websocket, as a client of the node does,
// reading as fast as it can; cmtcancelled NAME says how it ended.
//
//	cmtsubscribe [-node URL] NAME QUERY
func cmdCmtSubscribe(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmtsubscribe [-node URL] NAME QUERY")
	}
	ctx, cancel := context.WithCancel(cmtCtx(ts))
	ts.Defer(cancel)
	ch, err := cometbfttest.Subscribe(ctx, node, args[1])
	ts.Check(err)
	subscriptions.Store(subKey{ts, args[0]}, ch)
	ts.Defer(func() { subscriptions.Delete(subKey{ts, args[0]}) })
}

// cmdCmtCancelled checks that the node cancelled the subscription NAME before it had sent
// N events: it reads what the subscriber got until the subscription ends (or nothing comes
// for 5 s while the node's blocks go on).
//
//	cmtcancelled NAME N
func cmdCmtCancelled(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmtcancelled NAME N")
	}
	v, ok := subscriptions.Load(subKey{ts, args[0]})
	if !ok {
		ts.Fatalf("cmtcancelled: no subscription %s", args[0])
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	ch := v.(<-chan cometbfttest.WSEvent)
	got, ended := cometbfttest.CountTxs(ch, 5*time.Second)
	ts.Logf("the websocket subscriber got %d of %d transactions, then: %s", got, n, ended)
	if got >= n || !strings.Contains(ended, "subscription was canceled") {
		ts.Fatalf("cmtcancelled: the subscriber got %d of %d and ended with %q: the node did not cancel it", got, n, ended)
	}
}

// cmdCmtSync waits until the full node FULL has every height VAL has now.
//
//	cmtsync
func cmdCmtSync(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: cmtsync")
	}
	st, err := (&cometbfttest.Node{URL: ts.Getenv("VAL")}).Status()
	ts.Check(err)
	ts.Check((&cometbfttest.Node{URL: ts.Getenv("FULL")}).WaitHeight(cmtCtx(ts), st.Latest))
}

// cmdCmtPruned waits until the node has pruned the heights after a checkpoint's (its lowest
// height is at least two above the next one), and sets VAR to the first lost height.
//
//	cmtpruned [-node URL] CHECKPOINT VAR
func cmdCmtPruned(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmtpruned [-node URL] CHECKPOINT VAR")
	}
	cp, ok, err := cursor.LoadCheckpoint(ts.MkAbs(args[0]))
	ts.Check(err)
	if !ok || cp.Cursor == "" {
		ts.Fatalf("cmtpruned: %s holds no cursor", args[0])
	}
	h, err := cometbfttest.HeightOf(cp.Cursor)
	ts.Check(err)
	ctx := cmtCtx(ts)
	for {
		if st, err := node.Status(); err == nil && st.Earliest > h+2 {
			break
		}
		select {
		case <-ctx.Done():
			ts.Fatalf("cmtpruned: the node did not prune past height %d", h+2)
		case <-time.After(50 * time.Millisecond):
		}
	}
	ts.Setenv(args[1], strconv.FormatInt(h+1, 10))
}

// cmdCmtSince checks that a file of items begins with item 0 of the first block made at or
// after TIME (RFC 3339) that the node holds.
//
//	cmtsince [-node URL] FILE TIME
func cmdCmtSince(ts *testscript.TestScript, neg bool, args []string) {
	node, args := cmtNode(ts, args)
	if neg || len(args) != 2 {
		ts.Fatalf("usage: cmtsince [-node URL] FILE TIME")
	}
	since, err := time.Parse(time.RFC3339Nano, args[1])
	ts.Check(err)
	items := readLines(ts, args[0])
	if len(items) == 0 {
		ts.Fatalf("cmtsince: %s holds no items", args[0])
	}
	c := gjson.GetBytes(items[0], "cursor").String()
	h, err := cometbfttest.HeightOf(c)
	ts.Check(err)
	if !strings.HasSuffix(c, ".00000000") {
		ts.Fatalf("cmtsince: the first item, %s, is not a block's first", c)
	}
	blockTime := func(h int64) time.Time {
		var r struct {
			Result struct {
				Block struct {
					Header struct {
						Time time.Time `json:"time"`
					} `json:"header"`
				} `json:"block"`
			} `json:"result"`
		}
		ts.Check(node.Get(cmtCtx(ts), "block", url.Values{"height": {strconv.FormatInt(h, 10)}}, &r))
		return r.Result.Block.Header.Time
	}
	if t := blockTime(h); t.Before(since) {
		ts.Fatalf("cmtsince: the first item's block, %d, was made at %v, before %v", h, t, since)
	}
	if t := blockTime(h - 1); !t.Before(since) {
		ts.Fatalf("cmtsince: block %d, before the first item's, was made at %v, not before %v", h-1, t, since)
	}
}

// testChainTUI opens tail -i on a chain at 80×24 (testdata/tmux/cometbft_tui.sh) and checks
// the screen it saved: every line fits, the status bar is the last line, the rows show the
// chain's items — block events and transactions — each with its block's time, and nothing
// was written over the UI.
func testChainTUI(t *testing.T, node *cometbfttest.Node) {
	needTmux(t)
	ctx, cancel := testwait.Context(t, context.Background())
	defer cancel()
	if _, err := node.SendTxs(ctx, "tui", 3); err != nil {
		t.Fatal(err)
	}
	// The UI follows the head, where empty blocks come every half second: a transaction
	// every 300 ms while it runs keeps both kinds of item on its screen, whatever else is
	// sent to the chain meanwhile.
	feed, stopFeed := context.WithCancel(ctx)
	var fed sync.WaitGroup
	fed.Add(1)
	go func() {
		defer fed.Done()
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-feed.Done():
				return
			case <-tick.C:
			}
			if err := node.BroadcastAsync(feed, []string{fmt.Sprintf("tuifeed%d=v%d", i, i)}, 1); err != nil && feed.Err() == nil {
				t.Logf("sending a transaction while the UI runs: %v", err)
			}
		}
	}()
	work := runTmuxScript(t, "cometbft_tui.sh", "EVTCTL_NODE="+node.URL)
	stopFeed()
	fed.Wait()
	b, err := os.ReadFile(filepath.Join(work, "screen.txt"))
	if err != nil {
		t.Fatal(err)
	}
	screen := strings.TrimSuffix(string(b), "\n")
	lines := strings.Split(screen, "\n")
	row := regexp.MustCompile(`^(?:  |▶ )\d\d:\d\d:\d\d\.\d{3} (NewBlockEvents|Tx) `)
	var problems []string
	if len(lines) != 24 {
		problems = append(problems, fmt.Sprintf("%d lines, want 24", len(lines)))
	}
	kinds := map[string]int{}
	for i, l := range lines {
		if w := ansi.StringWidth(l); w > 80 {
			problems = append(problems, fmt.Sprintf("line %d is %d columns wide", i+1, w))
		}
		if m := row.FindStringSubmatch(l); m != nil {
			kinds[m[1]]++
		}
	}
	if kinds["NewBlockEvents"] == 0 || kinds["Tx"] == 0 {
		problems = append(problems, fmt.Sprintf("rows with a time: %v; want block events and transactions", kinds))
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "? help") || !strings.Contains(last, "●") {
		problems = append(problems, "the last line is not the whole status bar")
	}
	// What the node turned out to be is said on stderr, which the UI draws on: not while it
	// runs, but once it has given the terminal back.
	if strings.Contains(screen, "is a CometBFT node") {
		problems = append(problems, "a line on stderr was written over the UI")
	}
	if after, err := os.ReadFile(filepath.Join(work, "after.txt")); err != nil || !strings.Contains(string(after), "is a CometBFT node (v") {
		problems = append(problems, fmt.Sprintf("once the UI ended, the terminal does not say what the node is (%v):\n%s", err, after))
	}
	if len(problems) > 0 {
		t.Errorf("%s\n%s", strings.Join(problems, "; "), screen)
	}
}
