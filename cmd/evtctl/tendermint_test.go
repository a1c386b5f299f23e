package main

// End-to-end scripts (testdata/tendermint) that run the evtctl binary against a real
// Tendermint node: the peer a Tendermint user points evtctl at, started from the project's
// shared peers folder (../shared/peers beside the module). The fake Tendermint node in
// pkg/client stays for what a real node cannot be made to do (faults, exact timing).

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/testwait"
	"github.com/evtctl/evtctl/internal/tmnode"
	"github.com/evtctl/evtctl/pkg/cursor"
)

func TestTendermintScripts(t *testing.T) {
	t.Parallel()
	script, missing := tmnode.Script()
	if script == "" {
		t.Skip("skipping: " + missing)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "../../testdata/tendermint",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			if err := scriptEnv(env); err != nil {
				return err
			}
			env.Setenv("TM_NODE_SCRIPT", script)
			if t, ok := env.T().(testing.TB); ok {
				if d, ok := testwait.Deadline(t); ok {
					env.Values[deadlineKey{}] = d
				}
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"tmnode":       cmdTMNode,
			"tmrestart":    cmdTMRestart,
			"tmtx":         cmdTMTx,
			"tmsettle":     cmdTMSettle,
			"tmitems":      cmdTMItems,
			"tmvar":        cmdTMVar,
			"tmcount":      cmdTMCount,
			"tmpred":       cmdTMPred,
			"cursors":      cmdCursors,
			"mkcheckpoint": cmdMkCheckpoint,
			"status":       cmdStatus,
			"jsonl":        cmdJSONL,
			"now":          cmdNow,
			"waitfile":     cmdWaitFile,
			"sleep":        cmdSleep,
		},
	})
}

// tmNodes holds each script's running node, so that a script can move on to another.
var tmNodes sync.Map // *testscript.TestScript → *tmnode.Node

// cmdTMNode starts a real Tendermint node on free loopback ports, sets TM to its RPC URL and
// points EVTCTL_NODE at it; the node is stopped when the script ends, or when the script
// starts another.
//
//	tmnode [KEY=VALUE ...]   (settings by name, e.g. event-log-max-items=20)
func cmdTMNode(ts *testscript.TestScript, neg bool, args []string) {
	if neg {
		ts.Fatalf("unsupported: ! tmnode")
	}
	if prev, ok := tmNodes.LoadAndDelete(ts); ok {
		prev.(*tmnode.Node).Stop()
	}
	home, err := os.MkdirTemp(ts.MkAbs("."), "tm")
	ts.Check(err)
	n, err := tmnode.Launch(ts.Getenv("TM_NODE_SCRIPT"), home, args...)
	ts.Check(err)
	tmNodes.Store(ts, n)
	ts.Defer(func() {
		if n, ok := tmNodes.LoadAndDelete(ts); ok {
			n.(*tmnode.Node).Stop()
		}
	})
	ts.Setenv("TM", n.URL)
	ts.Setenv("EVTCTL_NODE", n.URL)
}

// cmdTMRestart restarts the script's node with the same home folder and ports: its chain
// goes on, its event log (in memory) starts again at 0001.
//
//	tmrestart
func cmdTMRestart(ts *testscript.TestScript, neg bool, args []string) {
	n, ok := tmNodes.Load(ts)
	if neg || len(args) != 0 || !ok {
		ts.Fatalf("usage: tmrestart, after tmnode")
	}
	ts.Check(n.(*tmnode.Node).Restart())
}

var tmTxSeq atomic.Int64

// cmdTMTx commits N transactions, one block each (broadcast_tx_commit).
//
//	tmtx [N]
func cmdTMTx(ts *testscript.TestScript, neg bool, args []string) {
	n := 1
	if len(args) == 1 {
		var err error
		n, err = strconv.Atoi(args[0])
		ts.Check(err)
	}
	node := tmnode.Node{URL: ts.Getenv("TM")}
	for range n {
		ts.Check(node.Commit(fmt.Sprintf("k%d=v%d", tmTxSeq.Add(1), time.Now().UnixNano())))
	}
}

// tmCall calls the events method of the node at TM.
func tmCall(ts *testscript.TestScript, params map[string]any) gjson.Result {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "events", "params": params})
	ts.Check(err)
	resp, err := http.Post(ts.Getenv("TM"), "application/json", bytes.NewReader(body))
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	r := gjson.ParseBytes(b)
	if r.Get("error").Exists() {
		ts.Fatalf("events %s: %s", body, b)
	}
	return r.Get("result")
}

// afterAll is a `before` cursor past every real one: the node answers at once.
const afterAll = "7fffffffffffffff-ffff"

// deadlineKey holds, in a script's values, when a wait for the node gives up (testwait).
type deadlineKey struct{}

// cmdTMSettle waits until the node is idle: with create-empty-blocks=false it then makes no
// block and logs no item until the next transaction. It is idle when its mempool is empty,
// its latest block H needs no block after it (the application's hash after H is the one in
// H's header: no proof block follows), and the newest item of its log is the NewRound of
// height H+1, round 0 begun and waiting for a transaction; the newest item is read before
// and after the rest, and must not have moved.
//
//	tmsettle
func cmdTMSettle(ts *testscript.TestScript, neg bool, args []string) {
	deadline, bounded := ts.Value(deadlineKey{}).(time.Time)
	newest := func() gjson.Result {
		return tmCall(ts, map[string]any{"maxItems": 1, "before": afterAll}).Get("items.0")
	}
	var state string
	for {
		first := newest()
		st := tmGet(ts, "/status").Get("sync_info")
		abci := tmGet(ts, "/abci_info").Get("response")
		pending := tmGet(ts, "/num_unconfirmed_txs").Get("total").Int()
		last := newest()
		height := st.Get("latest_block_height").Int()
		appHash, err := base64.StdEncoding.DecodeString(abci.Get("last_block_app_hash").String())
		ts.Check(err)
		state = fmt.Sprintf("block %d with app hash %s, application at block %d with %X, %d transactions pending, newest item %s %s",
			height, st.Get("latest_app_hash"), abci.Get("last_block_height").Int(), appHash, pending,
			last.Get("event"), last.Get("data.value.height"))
		if first.Get("cursor").String() == last.Get("cursor").String() && pending == 0 &&
			abci.Get("last_block_height").Int() == height && strings.EqualFold(fmt.Sprintf("%X", appHash), st.Get("latest_app_hash").String()) &&
			last.Get("event").String() == "NewRound" && last.Get("data.value.height").Int() == height+1 {
			return
		}
		if bounded && time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	ts.Fatalf("tmsettle: the node did not go idle: %s", state)
}

// tmGet gets a URI endpoint of the node at TM and returns its result.
func tmGet(ts *testscript.TestScript, path string) gjson.Result {
	resp, err := http.Get(ts.Getenv("TM") + path)
	ts.Check(err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	ts.Check(err)
	r := gjson.ParseBytes(b)
	if resp.StatusCode != http.StatusOK || r.Get("error").Exists() {
		ts.Fatalf("GET %s: HTTP %d %s", path, resp.StatusCode, b)
	}
	if res := r.Get("result"); res.Exists() { // JSON-RPC envelope, where the node uses one
		return res
	}
	return r
}

// tmItems pages through the node's whole log by raw JSON-RPC, newest first with `before`
// until `more` is false, and returns the cursors oldest first.
func tmItems(ts *testscript.TestScript, query string) []string {
	var out []string
	before := afterAll
	for {
		p := map[string]any{"maxItems": 100, "before": before}
		if query != "" {
			p["filter"] = map[string]any{"query": query}
		}
		r := tmCall(ts, p)
		items := r.Get("items").Array()
		for _, it := range items {
			out = append(out, it.Get("cursor").String())
		}
		if !r.Get("more").Bool() || len(items) == 0 {
			break
		}
		before = items[len(items)-1].Get("cursor").String()
	}
	slices.Reverse(out)
	return out
}

// span picks items I to J (1-based, inclusive; negative counts from the newest).
func span(ts *testscript.TestScript, all []string, from, to string) []string {
	idx := func(s string) int {
		i, err := strconv.Atoi(s)
		ts.Check(err)
		if i < 0 {
			i = len(all) + 1 + i
		}
		if i < 1 || i > len(all) {
			ts.Fatalf("item %s: the log holds %d", s, len(all))
		}
		return i
	}
	i, j := 1, len(all)
	if from != "" {
		i = idx(from)
	}
	if to != "" {
		j = idx(to)
	}
	return all[i-1 : j]
}

// cmdTMItems writes the cursors of the node's log to FILE, oldest first, as found by raw
// JSON-RPC paging; -from and -to pick items by position (1-based, inclusive, negative
// from the newest), -query filters.
//
//	tmitems [-from I] [-to J] [-query Q] FILE
func cmdTMItems(ts *testscript.TestScript, neg bool, args []string) {
	var from, to, query string
	for len(args) > 1 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-from":
			from = args[1]
		case "-to":
			to = args[1]
		case "-query":
			query = args[1]
		default:
			ts.Fatalf("tmitems: unknown flag %s", args[0])
		}
		args = args[2:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: tmitems [-from I] [-to J] [-query Q] FILE")
	}
	items := span(ts, tmItems(ts, query), from, to)
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(lines(items)), 0o644))
}

// cmdTMCount sets NAME to the number of items the node holds, by raw JSON-RPC paging.
//
//	tmcount NAME
func cmdTMCount(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: tmcount NAME")
	}
	ts.Setenv(args[0], strconv.Itoa(len(tmItems(ts, ""))))
}

// cmdTMVar sets NAME to the cursor of item I of the node's log (1-based, negative from the
// newest), or with -time to its time in RFC 3339.
//
//	tmvar [-time] NAME I
func cmdTMVar(ts *testscript.TestScript, neg bool, args []string) {
	asTime := len(args) > 0 && args[0] == "-time"
	if asTime {
		args = args[1:]
	}
	if len(args) != 2 {
		ts.Fatalf("usage: tmvar [-time] NAME I")
	}
	c := span(ts, tmItems(ts, ""), args[1], args[1])[0]
	if asTime {
		cc, err := cursor.Parse(c)
		ts.Check(err)
		c = cc.Time().UTC().Format(time.RFC3339Nano)
	}
	ts.Setenv(args[0], c)
}

// cmdTMPred sets NAME to the cursor in FILE (one per line) of the item right before the
// node's oldest item now: a reader that stopped there has lost nothing.
//
//	tmpred NAME FILE
func cmdTMPred(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: tmpred NAME FILE")
	}
	oldest, err := cursor.Parse(tmCall(ts, map[string]any{"maxItems": 1, "before": afterAll}).Get("oldest").String())
	ts.Check(err)
	for _, c := range strings.Fields(ts.ReadFile(args[1])) {
		cc, err := cursor.Parse(c)
		ts.Check(err)
		if oldest.Follows(cc) {
			ts.Setenv(args[0], c)
			return
		}
	}
	ts.Fatalf("tmpred: no cursor in %s comes right before the oldest item %s", args[1], oldest)
}

// cmdCursors writes the cursors of the last command's stdout (JSON lines) to FILE, one per
// line; -append adds them to what FILE holds.
//
//	cursors [-append] FILE
func cmdCursors(ts *testscript.TestScript, neg bool, args []string) {
	appendTo := len(args) > 0 && args[0] == "-append"
	if appendTo {
		args = args[1:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: cursors [-append] FILE")
	}
	var cs []string
	sc := bufio.NewScanner(strings.NewReader(ts.ReadFile("stdout")))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		c := gjson.Get(sc.Text(), "cursor")
		if !c.Exists() {
			ts.Fatalf("cursors: a line without a cursor: %q", sc.Text())
		}
		cs = append(cs, c.String())
	}
	text := lines(cs)
	if appendTo {
		if old, err := os.ReadFile(ts.MkAbs(args[0])); err == nil {
			text = string(old) + text
		}
	}
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(text), 0o644))
}

// cmdMkCheckpoint writes a checkpoint file holding CURSOR, as tail --checkpoint does.
//
//	mkcheckpoint FILE CURSOR
func cmdMkCheckpoint(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: mkcheckpoint FILE CURSOR")
	}
	ts.Check(cursor.SaveCheckpoint(ts.MkAbs(args[0]), cursor.Checkpoint{Cursor: args[1], Node: ts.Getenv("TM"), Updated: time.Now().UTC()}))
}

func lines(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return strings.Join(ss, "\n") + "\n"
}

// cmdSleep pauses the script, for traffic spaced in time: for DURATION, or until DURATION
// after the time in variable VAR (as now sets it).
//
//	sleep [-since VAR] DURATION
func cmdSleep(ts *testscript.TestScript, neg bool, args []string) {
	since := time.Now()
	if len(args) == 3 && args[0] == "-since" {
		t, err := time.Parse(time.RFC3339Nano, ts.Getenv(args[1]))
		ts.Check(err)
		since, args = t, args[2:]
	}
	if len(args) != 1 {
		ts.Fatalf("usage: sleep [-since VAR] DURATION")
	}
	d, err := time.ParseDuration(args[0])
	ts.Check(err)
	time.Sleep(time.Until(since.Add(d)))
}
