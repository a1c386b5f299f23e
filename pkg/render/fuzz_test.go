package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

// fuzzOptions are the renderers FuzzRender picks from.
var fuzzOptions = []Options{
	{Format: "jsonl"},
	{Format: "ce"},
	{Format: "data"},
	{Format: "pretty"},
	{Format: "pretty", Color: true},
	{Format: "template", Template: `{{.Cursor}} {{.ID}} {{.Type}} {{.Time}} {{json .Data}} {{json .Payload}} {{get "data.data"}} {{.CursorTime}} {{.Raw | trunc 9}}`},
	{Format: "jsonl", Fields: []string{"cursor", "data.id", "data.data", "data.value.height", "@this"}},
	{Format: "ce", Fields: []string{"id", "data.#", "value"}},
	{Format: "data", Fields: []string{"@this", "user.id", "0"}},
	{Format: "pretty", Width: func() int { return 80 }},
	{Format: "pretty", Color: true, Width: func() int { return 33 }},
}

func FuzzRender(f *testing.F) {
	src, err := os.ReadFile(filepath.Join("testdata", "items.jsonl"))
	if err != nil {
		f.Fatal(err)
	}
	for line := range bytes.Lines(src) {
		for i := range fuzzOptions {
			f.Add(bytes.TrimSuffix(line, []byte("\n")), uint8(i))
		}
	}
	f.Add([]byte(`{"cursor":"x","data":{"specversion":1,"data_base64":"!!"}}`), uint8(5))
	f.Add([]byte(`{"data":{"specversion":"1.0","data":{"a" : [1, 2]}}}`), uint8(2))
	f.Add([]byte(`{"a": "\u001b"}`), uint8(0))

	f.Fuzz(func(t *testing.T, raw []byte, pick uint8) {
		opts := fuzzOptions[int(pick)%len(fuzzOptions)]
		var it client.Item
		decoded := json.Unmarshal(raw, &it) == nil
		if !decoded {
			// Not an item: feed the bytes anyway, which must not panic.
			it = client.Item{Item: wire.Item{Cursor: "c", Event: "e", Data: raw}, Raw: raw}
		}
		var out bytes.Buffer
		r, err := New(&out, opts)
		if err != nil {
			t.Fatal(err)
		}
		itemErr := r.Item(it)
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if !decoded {
			return
		}
		got := out.String()
		switch opts.Format {
		case "jsonl", "ce", "data":
			if itemErr != nil {
				t.Fatalf("%s of a valid item %q: %v", opts.Format, raw, itemErr)
			}
			line, ok := strings.CutSuffix(got, "\n")
			if !ok || strings.Contains(line, "\n") || !json.Valid([]byte(line)) {
				t.Fatalf("%s%v of %q: not one line of JSON: %q", opts.Format, opts.Fields, raw, got)
			}
			if opts.Format == "jsonl" && opts.Fields == nil {
				var want bytes.Buffer
				_ = json.Compact(&want, raw)
				if line != want.String() {
					t.Fatalf("jsonl of %q:\n got %s\nwant %s", raw, line, want.String())
				}
			}
		case "pretty":
			if itemErr != nil {
				t.Fatalf("pretty of %q: %v", raw, itemErr)
			}
			if strings.Count(got, "\n") != 1 || !strings.HasSuffix(got, "\n") {
				t.Fatalf("pretty of %q: not one line: %q", raw, got)
			}
			esc := strings.Count(got, "\x1b")
			if opts.Color {
				esc -= strings.Count(got, styleReset) * 2 // each style is opened and reset
			}
			if esc != 0 {
				t.Fatalf("pretty of %q: stray ESC in %q", raw, got)
			}
			if opts.Width != nil {
				if w, n := opts.Width(), cols(strings.TrimSuffix(got, "\n")); n > w {
					t.Fatalf("pretty of %q fitted to %d columns: %d columns: %q", raw, w, n, got)
				}
			}
		}
	})
}

// FuzzIsCompact holds isCompact to json.Compact on valid JSON.
func FuzzIsCompact(f *testing.F) {
	f.Add([]byte(`{"a":"x\" y","b":[1, 2]}`))
	f.Add([]byte(`{"a":"\\","b c":"d\u0020"}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, _, ref := scanBytes(doc, 0, len(doc), 0)
		if got := swarCompact(doc, 0); got != ref {
			t.Fatalf("swarCompact(%q) = %v, byte by byte %v", doc, got, ref)
		}
		var c bytes.Buffer
		if json.Compact(&c, doc) != nil {
			return
		}
		if got, want := isCompact(string(doc)), bytes.Equal(c.Bytes(), doc); got != want {
			t.Fatalf("isCompact(%q) = %v, want %v", doc, got, want)
		}
	})
}

// FuzzTemplate feeds template sources: New either refuses one or returns a renderer, and
// rendering a test item never panics; a field of an event it lacks is found before any
// item, or (in a defined template) named when it runs.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{`{{.ID}}`, `{{.Nope}}`, `{{if .CloudEvent}}{{.Typ}}{{else}}{{$.X}}{{end}}`,
		`{{range .Data}}{{.a}}{{end}}`, `{{with .Payload}}{{.user.id}}{{end}}{{get "data.user.id"}}{{item "cursor"}}`,
		`{{template "t" .}}{{define "t"}}{{.Nope}}{{end}}`, `{{(.Nope).x}}`, `{{$x := .Raw}}{{$x}}`, `{{nosuch}}`} {
		f.Add(s)
	}
	items := loadItems(f)
	f.Fuzz(func(t *testing.T, src string) {
		r, err := New(&bytes.Buffer{}, Options{Format: "template", Template: src})
		if err != nil {
			return
		}
		for _, it := range items[:2] {
			if err := r.Item(it); err != nil && strings.Contains(err.Error(), "render.view") {
				t.Fatalf("%q: %v", src, err)
			}
		}
	})
}
