// Package tmnode starts a real Tendermint node for tests, from the peers folder that lies
// beside the project (../shared/peers from the module root).
package tmnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Node is a running Tendermint node.
type Node struct {
	URL  string // the RPC base URL, e.g. http://127.0.0.1:41234
	pid  int
	bin  string // the tendermint binary
	home string // the node's home folder
}

// PeersDir returns the peers folder: ../shared/peers from the module root, which is found by
// walking up from the working directory (a test's package directory) to go.mod.
func PeersDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "peers"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Script returns the script that starts a real node, or "" and a sentence saying what is
// missing, for a skip message.
func Script() (script, missing string) {
	peers, err := PeersDir()
	if err != nil {
		return "", fmt.Sprintf("cannot find the peers folder for a real Tendermint node: %v", err)
	}
	script = filepath.Join(peers, "tendermint-node")
	for _, p := range []string{script, filepath.Join(peers, "tendermint")} {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Sprintf("this test needs a real Tendermint node, and %s is missing (the peers folder is ../shared/peers from the project root)", p)
		}
	}
	for _, tool := range []string{"python3", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", "this test needs a real Tendermint node, and its start script needs " + tool
		}
	}
	return script, ""
}

// Start starts a node with settings such as "create-empty-blocks=false" and stops it when the
// test ends. It skips the test, saying what is missing, when the peers folder has no node.
func Start(t testing.TB, settings ...string) *Node {
	t.Helper()
	script, missing := Script()
	if script == "" {
		t.Skip("skipping: " + missing)
	}
	n, err := Launch(script, filepath.Join(t.TempDir(), "home"), settings...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop) // before the home folder is removed: cleanups run last first
	return n
}

// Launch starts a node from script with its home in dir; the caller must Stop it.
func Launch(script, dir string, settings ...string) (*Node, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, script, append([]string{dir}, settings...)...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("starting a Tendermint node: %v\n%s", err, stderr.Bytes())
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return nil, fmt.Errorf("starting a Tendermint node: want its URL and PID, got %q", out)
	}
	pid, err := strconv.Atoi(lines[1])
	if err != nil {
		return nil, fmt.Errorf("starting a Tendermint node: PID %q: %v", lines[1], err)
	}
	return &Node{URL: lines[0], pid: pid, bin: filepath.Join(filepath.Dir(script), "tendermint"), home: dir}, nil
}

// Restart stops the node and starts it again with the same home folder: the same chain and
// ports, and, as a real node's event log lives in memory only, a new log numbered from 0001.
// It returns once the node answers again.
func (n *Node) Restart() error {
	n.Stop()
	logf, err := os.OpenFile(filepath.Join(n.home, "node.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(n.bin, "start", "--home", n.home)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting the Tendermint node: %v", err)
	}
	n.pid = cmd.Process.Pid
	go func() { _ = cmd.Wait() }() // reaped when it exits; Stop kills it
	for range 300 {
		if err := n.get("/status", `"node_info"`); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.Stop()
	return fmt.Errorf("the restarted Tendermint node did not answer; see %s", filepath.Join(n.home, "node.log"))
}

// Stop kills the node and waits until it is gone, so that its home folder can be removed.
func (n *Node) Stop() {
	if p, err := os.FindProcess(n.pid); err == nil {
		_ = p.Kill()
	}
	for range 100 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.pid)); err != nil || isZombie(b) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isZombie reports whether a /proc/PID/stat line shows a process that has exited.
func isZombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

// Broadcast sends a transaction "key=value" with broadcast_tx_async: it returns at once, and
// the transaction is in one of the next blocks.
func (n *Node) Broadcast(tx string) error {
	return n.get("/broadcast_tx_async?tx="+url.QueryEscape(strconv.Quote(tx)), `"hash"`)
}

// Commit sends a transaction "key=value" with broadcast_tx_commit and returns once it is in
// a block, after those broadcast before it.
func (n *Node) Commit(tx string) error {
	return n.get("/broadcast_tx_commit?tx="+url.QueryEscape(strconv.Quote(tx)), `"tx_result"`)
}

func (n *Node) get(target, want string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.URL+target, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(want)) {
		return fmt.Errorf("GET %s: HTTP %d %s", target, resp.StatusCode, b)
	}
	return nil
}
