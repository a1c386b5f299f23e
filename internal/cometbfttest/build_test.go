package cometbfttest

import (
	"strings"
	"testing"
)

// Without the go command, a line that is not built yet cannot be had, and the error says
// why (Need turns it into a skip).
func TestProgramNeedsGo(t *testing.T) {
	t.Setenv(EnvDir, t.TempDir())
	t.Setenv("PATH", t.TempDir())
	built.mu.Lock()
	saved := built.got
	built.got = nil
	built.mu.Unlock()
	t.Cleanup(func() { built.mu.Lock(); built.got = saved; built.mu.Unlock() })
	for _, kind := range []Kind{KindCometBFT, KindKVNode} {
		_, err := Program("0.38", kind)
		if err == nil || !strings.Contains(err.Error(), "needs the go command") {
			t.Errorf("%s without go: %v", kind, err)
		}
	}
	if _, err := Program("0.36", KindCometBFT); err == nil || !strings.Contains(err.Error(), "not a line") {
		t.Errorf("an unknown line: %v", err)
	}
}

func TestSetTOML(t *testing.T) {
	in := "moniker = \"x\"\n\n[rpc]\nladdr = \"tcp://127.0.0.1:26657\"\n# laddr = \"commented\"\n\n[p2p]\nladdr = \"tcp://0.0.0.0:26656\"\npex = true\n\n[storage.pruning]\ninterval = \"10s\"\n"
	out, err := setTOML([]byte(in), map[string]string{"rpc.laddr": `"tcp://127.0.0.1:1"`, "p2p.pex": "false", "storage.pruning.interval": `"1s"`, "moniker": `"y"`})
	if err != nil {
		t.Fatal(err)
	}
	want := "moniker = \"y\"\n\n[rpc]\nladdr = \"tcp://127.0.0.1:1\"\n# laddr = \"commented\"\n\n[p2p]\nladdr = \"tcp://0.0.0.0:26656\"\npex = false\n\n[storage.pruning]\ninterval = \"1s\"\n"
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if _, err := setTOML([]byte(in), map[string]string{"rpc.nothing": "1"}); err == nil {
		t.Error("a setting the file does not have: no error")
	}
}
