package cometbfttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/buildtest"
)

// Config describes a node to start.
type Config struct {
	// TimeoutCommit is the pause after each block, also when idle (empty blocks are on);
	// 0: 200ms, for quick tests, and none for a full node. A validator with a full node
	// peered needs a longer one (500ms), or the full node falls behind on a busy machine.
	TimeoutCommit time.Duration
	// RetainBlocks (kvnode only) keeps only the last RetainBlocks blocks.
	RetainBlocks int64
	// Discard sets storage.discard_abci_responses: the node keeps no block results.
	Discard bool
	// PruneInterval (v1 only) is the background pruner's interval; 0: 1s.
	PruneInterval time.Duration
	// Follow, when set, makes the node a full node of Follow's chain, peered with it.
	Follow *Node
	// Settings are more config.toml values: "section.key" (e.g. "mempool.size") to a TOML
	// value as written in the file ("20000", `"1s"`, "true").
	Settings map[string]string
}

// Node is a CometBFT node running as a child process.
type Node struct {
	Bin     Binary
	Config  Config
	URL     string // the RPC base URL, http://127.0.0.1:PORT
	Home    string
	ID      string // the node's p2p id
	P2PPort int

	logPath     string
	followIndex int // FollowSpec's mark: 1 + the index of the spec followed
	cmd         *exec.Cmd
	done        chan struct{}
	mu          sync.Mutex
}

// Start starts a node of bin for t, stopped when t ends, and waits until it has committed a
// block (a full node: until it has caught up with the node it follows).
func Start(t testing.TB, bin Binary, cfg Config) *Node {
	t.Helper()
	return StartAll(t, Spec{bin, cfg})[0]
}

// Spec is a node to start: its program and configuration.
type Spec struct {
	Bin    Binary
	Config Config
}

// StartAll starts nodes at once for t, stopped when t ends, and waits until each has
// committed a block. A spec may Follow a node of an earlier spec (specs[i].Config.Follow
// set by FollowSpec): the two start together, so that the full node is not left behind. A
// port taken between choosing it and the node's listen is chosen again.
func StartAll(t testing.TB, specs ...Spec) []*Node {
	t.Helper()
	nodes, err := LaunchAll(t.TempDir, specs...)
	for _, n := range nodes {
		if n == nil {
			continue
		}
		t.Cleanup(func() {
			n.Stop()
			if t.Failed() {
				if b, err := os.ReadFile(n.logPath); err == nil {
					t.Logf("%s %s node %s log, last lines:\n%s", n.Bin.Kind, n.Bin.Version, n.URL, buildtest.LastLines(b, 25))
				}
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// FollowSpec marks a Config's Follow as the node of specs[i] in a StartAll or LaunchAll call.
func FollowSpec(i int) *Node { return &Node{followIndex: i + 1} }

// LaunchAll starts nodes at once, each with its home in a new directory from dir; the caller
// stops them. On error, the nodes that were made are returned too (nil for the others).
func LaunchAll(dir func() string, specs ...Spec) ([]*Node, error) {
	nodes := make([]*Node, len(specs))
	for attempt := 1; ; attempt++ {
		for i, s := range specs {
			if f := s.Config.Follow; f != nil && f.followIndex > 0 {
				if f.followIndex-1 >= i {
					return nodes, fmt.Errorf("spec %d follows spec %d, which does not come before it", i, f.followIndex-1)
				}
				s.Config.Follow = nodes[f.followIndex-1]
			}
			n, err := prepare(dir(), s.Bin, s.Config)
			if err != nil {
				return nodes, err
			}
			nodes[i] = n
		}
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = n.start() }()
		}
		wg.Wait()
		err := errors.Join(errs...)
		if err == nil {
			return nodes, nil
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			return nodes, err
		}
		for _, n := range nodes {
			n.Stop()
		}
	}
}

// Launch starts a node with its home in dir; the caller stops it (Stop).
func Launch(dir string, bin Binary, cfg Config) (*Node, error) {
	nodes, err := LaunchAll(func() string { return dir }, Spec{bin, cfg})
	return nodes[0], err
}

// prepare makes a node's home in dir: its keys, genesis (the followed node's, for a full
// node) and configuration, on free ports.
func prepare(dir string, bin Binary, cfg Config) (*Node, error) {
	n := &Node{Bin: bin, Config: cfg, Home: filepath.Join(dir, "home"), logPath: filepath.Join(dir, "node.log")}
	if out, err := n.run("init"); err != nil {
		return nil, fmt.Errorf("%s init: %v: %s", bin.Kind, err, out)
	}
	out, err := n.run("show-node-id")
	if err != nil {
		return nil, fmt.Errorf("%s show-node-id: %v: %s", bin.Kind, err, out)
	}
	n.ID = strings.TrimSpace(lastLine(out))
	if f := cfg.Follow; f != nil {
		g, err := os.ReadFile(filepath.Join(f.Home, "config", "genesis.json"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(n.Home, "config", "genesis.json"), g, 0o600); err != nil {
			return nil, err
		}
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	if err := n.configure(ports[0], ports[1]); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) run(args ...string) ([]byte, error) {
	cmd := exec.Command(n.Bin.Path, append(args, "--home", n.Home)...)
	return cmd.CombinedOutput()
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// configure writes the node's config.toml for its ports and Config.
func (n *Node) configure(rpc, p2p int) error {
	cfg := n.Config
	commit := cfg.TimeoutCommit
	switch {
	case commit > 0:
	case cfg.Follow != nil:
		// A full node waits for no one: after each block it is ready for the next at once,
		// or it falls behind the validator and never catches up.
		commit = 0
	default:
		commit = 200 * time.Millisecond
	}
	set := map[string]string{
		"rpc.laddr":                      quote(fmt.Sprintf("tcp://127.0.0.1:%d", rpc)),
		"p2p.laddr":                      quote(fmt.Sprintf("tcp://127.0.0.1:%d", p2p)),
		"p2p.pex":                        "false",
		"p2p.addr_book_strict":           "false",
		"p2p.allow_duplicate_ip":         "true",
		"consensus.timeout_commit":       quote(commit.String()),
		"storage.discard_abci_responses": strconv.FormatBool(cfg.Discard),
		"mempool.size":                   "20000",
		"instrumentation.prometheus":     "false",
	}
	if n.Bin.Line == "1.0" {
		iv := cfg.PruneInterval
		if iv <= 0 {
			iv = time.Second
		}
		set["storage.pruning.interval"] = quote(iv.String())
	}
	if f := cfg.Follow; f != nil {
		set["p2p.persistent_peers"] = quote(fmt.Sprintf("%s@127.0.0.1:%d", f.ID, f.P2PPort))
	}
	for k, v := range cfg.Settings {
		set[k] = v
	}
	path := filepath.Join(n.Home, "config", "config.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := setTOML(b, set)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	n.URL = fmt.Sprintf("http://127.0.0.1:%d", rpc)
	n.P2PPort = p2p
	return os.WriteFile(path, out, 0o600)
}

func quote(s string) string { return strconv.Quote(s) }

// setTOML sets "section.key" values in a config file's text, line by line: each must be
// there already (CometBFT writes every setting).
func setTOML(b []byte, set map[string]string) ([]byte, error) {
	var out bytes.Buffer
	seen := map[string]bool{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "[") && strings.HasSuffix(trimmed, "]") {
			section = strings.Trim(trimmed, "[]")
		} else if k, _, ok := strings.Cut(trimmed, "="); ok && !strings.HasPrefix(trimmed, "#") {
			name := strings.TrimSpace(k)
			if section != "" {
				name = section + "." + name
			}
			if v, ok := set[name]; ok {
				line = strings.TrimSpace(k) + " = " + v
				seen[name] = true
			}
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	for k := range set {
		if !seen[k] {
			return nil, fmt.Errorf("no setting %s", k)
		}
	}
	return out.Bytes(), sc.Err()
}

// start starts the node's process and waits until it serves its RPC and has committed a
// block; a full node, until it has caught up.
func (n *Node) start() error {
	args := []string{"node", "--home", n.Home}
	if n.Bin.Kind == KindCometBFT {
		args = append(args, "--proxy_app=kvstore")
	}
	cmd := exec.Command(n.Bin.Path, args...)
	if n.Config.RetainBlocks > 0 {
		cmd.Env = append(os.Environ(), "KVNODE_RETAIN_BLOCKS="+strconv.FormatInt(n.Config.RetainBlocks, 10))
	}
	logf, err := os.Create(n.logPath)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for {
		select {
		case <-done:
			b, _ := os.ReadFile(n.logPath)
			return fmt.Errorf("%s %s exited at start: %s", n.Bin.Kind, n.Bin.Version, buildtest.LastLines(b, 15))
		case <-time.After(20 * time.Millisecond):
		}
		st, err := n.Status()
		last = fmt.Sprintf("status %+v, %v", st, err)
		if err == nil && st.Latest >= 1 && !st.CatchingUp {
			if n.Config.Follow == nil {
				return nil
			}
			if f, err := n.Config.Follow.Status(); err == nil && st.Latest+2 >= f.Latest {
				return nil
			}
		}
		if time.Now().After(deadline) {
			n.Stop()
			b, _ := os.ReadFile(n.logPath)
			return fmt.Errorf("%s %s did not commit a block within 60s (%s):\n%s", n.Bin.Kind, n.Bin.Version, last, buildtest.LastLines(b, 15))
		}
	}
}

// Running reports whether the node's process runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// Stop stops the node (SIGTERM, then SIGKILL after 10s) and waits for it to exit.
func (n *Node) Stop() {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Configure sets config.toml values of a stopped node ("section.key" to a TOML value, as in
// Config.Settings), for its next start.
func (n *Node) Configure(set map[string]string) error {
	if n.Running() {
		return fmt.Errorf("the node is running")
	}
	path := filepath.Join(n.Home, "config", "config.toml")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := setTOML(b, set)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o600)
}

// CompanionSettings are the settings that enable a v1 node's data companion pruning with
// initial retain heights: the node takes them the first time it starts with the companion
// enabled, and its pruner then prunes the block results below resultsRetain (and the blocks
// below blockRetain) that it has. A node started with them from genesis has none yet when
// its pruner first runs, so enable them on a node that has run for a while (Stop,
// Configure, Restart).
func CompanionSettings(blockRetain, resultsRetain int64) map[string]string {
	return map[string]string{
		"storage.pruning.data_companion.enabled":                             "true",
		"storage.pruning.data_companion.initial_block_retain_height":         strconv.FormatInt(blockRetain, 10),
		"storage.pruning.data_companion.initial_block_results_retain_height": strconv.FormatInt(resultsRetain, 10),
	}
}

// Restart starts a stopped node again, on the same ports and home.
func (n *Node) Restart() error {
	if n.Running() {
		return fmt.Errorf("the node is running")
	}
	return n.start()
}

// Status is the part of a node's status the tests use.
type Status struct {
	ChainID    string
	Latest     int64
	Earliest   int64
	CatchingUp bool
}

// Status calls the node's status.
func (n *Node) Status() (Status, error) {
	var r struct {
		Result struct {
			NodeInfo struct {
				Network string `json:"network"`
			} `json:"node_info"`
			SyncInfo struct {
				Latest     int64 `json:"latest_block_height,string"`
				Earliest   int64 `json:"earliest_block_height,string"`
				CatchingUp bool  `json:"catching_up"`
			} `json:"sync_info"`
		} `json:"result"`
	}
	if err := n.Get(context.Background(), "status", nil, &r); err != nil {
		return Status{}, err
	}
	si := r.Result.SyncInfo
	return Status{ChainID: r.Result.NodeInfo.Network, Latest: si.Latest, Earliest: si.Earliest, CatchingUp: si.CatchingUp}, nil
}

// Get calls a method by GET with query arguments (values as the node takes them: heights
// bare, strings quoted) and decodes the whole reply into v.
func (n *Node) Get(ctx context.Context, method string, args url.Values, v any) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	u := n.URL + "/" + method
	if len(args) > 0 {
		u += "?" + args.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var e struct {
		Error *struct {
			Data string `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error != nil {
		return fmt.Errorf("%s: %s", method, e.Error.Data)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %.200s", method, resp.StatusCode, b)
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(b, v)
}

// BroadcastCommit sends tx and waits until a block holds it; it returns the height.
func (n *Node) BroadcastCommit(ctx context.Context, tx string) (int64, error) {
	var r struct {
		Result struct {
			Height   int64               `json:"height,string"`
			CheckTx  struct{ Code int }  `json:"check_tx"`
			TxResult *struct{ Code int } `json:"tx_result"`  // v0.38 and later
			Deliver  *struct{ Code int } `json:"deliver_tx"` // v0.37
		} `json:"result"`
	}
	if err := n.Get(ctx, "broadcast_tx_commit", url.Values{"tx": {quote(tx)}}, &r); err != nil {
		return 0, err
	}
	if r.Result.CheckTx.Code != 0 {
		return 0, fmt.Errorf("tx %q refused by CheckTx: code %d", tx, r.Result.CheckTx.Code)
	}
	return r.Result.Height, nil
}

// asyncBatch is how many broadcast_tx_async calls BroadcastAsync sends in one request: the
// most a node takes by default (rpc.max_request_batch_size, v0.38 and later).
const asyncBatch = 10

// BroadcastAsync sends each tx without waiting for a block: broadcast_tx_async calls in
// JSON-RPC batches of asyncBatch, workers batches at once, so that thousands reach the
// mempool within a block's time even on a busy machine.
func (n *Node) BroadcastAsync(ctx context.Context, txs []string, workers int) error {
	work := make(chan []string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				if err := n.broadcastBatch(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for len(txs) > 0 {
		k := min(asyncBatch, len(txs))
		select {
		case work <- txs[:k]:
			txs = txs[k:]
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

// broadcastBatch posts one JSON-RPC batch of broadcast_tx_async calls, one a tx.
func (n *Node) broadcastBatch(ctx context.Context, txs []string) error {
	type call struct {
		JSONRPC string            `json:"jsonrpc"`
		ID      int               `json:"id"`
		Method  string            `json:"method"`
		Params  map[string][]byte `json:"params"`
	}
	calls := make([]call, len(txs))
	for i, tx := range txs {
		calls[i] = call{"2.0", i, "broadcast_tx_async", map[string][]byte{"tx": []byte(tx)}}
	}
	body, err := json.Marshal(calls)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	type reply struct {
		Error *struct {
			Data string `json:"data"`
		} `json:"error"`
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	// The node answers a batch of one with a reply that is no array.
	var replies []reply
	if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '{' {
		replies = make([]reply, 1)
		err = json.Unmarshal(b, &replies[0])
	} else {
		err = json.Unmarshal(b, &replies)
	}
	if err != nil {
		return fmt.Errorf("broadcast_tx_async: HTTP %d: %w: %.200s", resp.StatusCode, err, b)
	}
	if len(replies) != len(txs) {
		return fmt.Errorf("broadcast_tx_async: %d replies to %d calls", len(replies), len(txs))
	}
	for _, r := range replies {
		if r.Error != nil {
			return fmt.Errorf("broadcast_tx_async: %s", r.Error.Data)
		}
	}
	return nil
}

// SendTxs sends count transactions "PREFIXi=vi" to the node: the first three committed one by
// one (blocks of one), the rest at once from four workers (blocks of many), then one more,
// "PREFIXlast=done", committed. It returns the height by which all are committed.
func (n *Node) SendTxs(ctx context.Context, prefix string, count int) (int64, error) {
	var txs []string
	for i := range count {
		txs = append(txs, fmt.Sprintf("%s%d=v%d", prefix, i, i))
	}
	one := min(3, count)
	var last int64
	for _, tx := range txs[:one] {
		h, err := n.BroadcastCommit(ctx, tx)
		if err != nil {
			return 0, err
		}
		last = h
	}
	if count > one {
		if err := n.BroadcastAsync(ctx, txs[one:], 4); err != nil {
			return 0, err
		}
		h, err := n.BroadcastCommit(ctx, prefix+"last=done")
		if err != nil {
			return 0, err
		}
		last = h
	}
	return last, nil
}

// WaitHeight waits until the node's latest height is at least h, or ctx ends.
func (n *Node) WaitHeight(ctx context.Context, h int64) error {
	for {
		if st, err := n.Status(); err == nil && st.Latest >= h {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for height %d: %w", h, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// freePorts returns n loopback ports that were free when chosen.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
