package config

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "evtctl", "config.yaml")
	f := &File{CurrentContext: "prod", Contexts: map[string]*Context{
		"prod":  {Node: "https://events.example.com", Token: "r", IngestToken: "i", CAFile: "/etc/ca.pem"},
		"local": {Node: "http://127.0.0.1:7480", Insecure: true},
		"bus":   {Node: "kafka://k1:9092/openedx-learning", Kafka: map[string]string{"security.protocol": "SASL_SSL", "sasl.password": "pw"}},
	}}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600: the file holds tokens", st.Mode().Perm())
		}
		if TooOpen(path, f) {
			t.Fatal("a 0600 file reported as too open")
		}
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if !TooOpen(path, f) {
			t.Fatal("a world-readable file with tokens not reported")
		}
	}
	g, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if name, c := g.Current(); name != "prod" || !reflect.DeepEqual(c, f.Contexts["prod"]) {
		t.Fatalf("current %q %+v", name, c)
	}
	for _, n := range []string{"local", "bus"} {
		if !reflect.DeepEqual(g.Contexts[n], f.Contexts[n]) {
			t.Fatalf("%s %+v", n, g.Contexts[n])
		}
	}
	if got := strings.Join(g.Names(), ","); got != "bus,local,prod" {
		t.Fatalf("names %s", got)
	}
}

func TestLoadMissingIsEmpty(t *testing.T) {
	f, err := Load(filepath.Join(t.TempDir(), "none.yaml"))
	if err != nil || len(f.Contexts) != 0 || f.CurrentContext != "" {
		t.Fatalf("%+v %v", f, err)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"contexts:\n  a:\n    nodes: x\n", "line 3: unknown key nodes"},
		{"current: a\n", "unknown key current"},
		{"contexts:\n  a: {}\n", `context "a" has no node`},
		{"contexts:\n  a:\n", `context "a" has no node`},
		{"contexts:\n  'bad name':\n    node: x\n", `context name "bad name"`},
		{"current-context: b\ncontexts:\n  a:\n    node: x\n", `current-context "b" is not among the contexts`},
		{"contexts: [1]\n", "cannot unmarshal"},
		{"a: 1\n---\nb: 2\n", "unknown key a"},
		{"contexts: {}\n---\ncontexts: {}\n", "more than one YAML document"},
		{"\t- :", "yaml"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestParseEmpty(t *testing.T) {
	for _, in := range []string{"", "# nothing\n", "contexts: {}\n"} {
		f, err := Parse([]byte(in))
		if err != nil || f.Contexts == nil || len(f.Contexts) != 0 {
			t.Errorf("Parse(%q) = %+v, %v", in, f, err)
		}
	}
}

func TestLoadTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte("# "+strings.Repeat("x", MaxSize)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("got %v", err)
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"prod", "a", "eu-west.1", "my_node", strings.Repeat("a", 63)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "-x", ".x", "a b", "a/b", "ä", strings.Repeat("a", 64)} {
		if ValidName(bad) == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParse: any input is either refused with an error or gives a file that is
// consistent (every context has a valid name and a node; the current one exists) and
// survives a save and load unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte("current-context: a\ncontexts:\n  a:\n    node: http://x\n    token: t\n"))
	f.Add([]byte("contexts:\n  b:\n    node: y\n    insecure: true\n    ca-file: /c\n"))
	f.Add([]byte("contexts: {a: {node: z, ingest-token: i}}"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return
		}
		for name, c := range file.Contexts {
			if ValidName(name) != nil || c == nil || c.Node == "" {
				t.Fatalf("accepted context %q %+v", name, c)
			}
		}
		if file.CurrentContext != "" && file.Contexts[file.CurrentContext] == nil {
			t.Fatalf("current %q missing", file.CurrentContext)
		}
		path := filepath.Join(dir, "c.yaml")
		if err := file.Save(path); err != nil {
			t.Fatal(err)
		}
		again, err := Load(path)
		if err != nil {
			t.Fatalf("reloading what was saved: %v", err)
		}
		if again.CurrentContext != file.CurrentContext || len(again.Contexts) != len(file.Contexts) {
			t.Fatalf("round trip changed the file: %+v vs %+v", again, file)
		}
		for n, c := range file.Contexts {
			if !reflect.DeepEqual(again.Contexts[n], c) {
				t.Fatalf("context %q changed: %+v vs %+v", n, again.Contexts[n], c)
			}
		}
	})
}

// A kafka:// node's options are kept in the context; a password among them makes the file
// one that others must not read; options for a node that takes none are refused.
func TestKafkaOptions(t *testing.T) {
	c := &Context{Node: "kafka://k1/t"}
	if err := c.SetOptions(map[string]string{"sasl.username": "u", "sasl.password": "p"}); err != nil {
		t.Fatal(err)
	}
	if c.Options()["sasl.username"] != "u" {
		t.Errorf("options %v", c.Options())
	}
	h := &Context{Node: "https://events.example.com"}
	if err := h.SetOptions(map[string]string{"sasl.username": "u"}); err == nil {
		t.Error("options taken for an https node")
	}
	if h.Options() != nil {
		t.Errorf("an https node's options: %v", h.Options())
	}
	if !SecretOption("sasl.password") || SecretOption("sasl.username") || SecretOption("ssl.key.location") {
		t.Error("SecretOption")
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	f := &File{Contexts: map[string]*Context{"bus": c}}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if !TooOpen(path, f) {
			t.Error("a world-readable file with a Kafka password not reported")
		}
	}
	if _, err := Parse([]byte("contexts:\n  x:\n    node: http://h:1\n    kafka:\n      sasl.username: u\n")); err == nil || !strings.Contains(err.Error(), "not a kafka:// node") {
		t.Errorf("kafka options for an http node: %v", err)
	}
}
