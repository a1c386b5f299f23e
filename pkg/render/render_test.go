package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/wire"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// loadItems decodes testdata/items.jsonl as the client would.
func loadItems(t testing.TB) []client.Item {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "items.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var items []client.Item
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var it client.Item
		if err := json.Unmarshal(sc.Bytes(), &it); err != nil {
			t.Fatalf("items.jsonl line %d: %v", len(items)+1, err)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return items
}

// render writes items with opts and returns the output.
func render(t testing.TB, opts Options, items ...client.Item) string {
	t.Helper()
	var out bytes.Buffer
	r, err := New(&out, opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	for _, it := range items {
		if err := r.Item(it); err != nil {
			t.Fatalf("Item(%s): %v", it.Cursor, err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

const goldenTemplate = `{{.Cursor}} {{upper .Event}} ce={{.CloudEvent}} id={{.ID | default "-"}} type={{.Type | trunc 24}}` +
	` subject={{.Subject | default "-"}} time={{.Time | time "15:04:05.000"}} ct={{.DataContentType}}` +
	` ctime={{.CursorTime | time "2006-01-02T15:04:05.000Z07:00"}} height={{get "value.height"}} payload={{json .Payload}}`

var goldenCases = []struct {
	name string
	opts Options
}{
	{"jsonl", Options{Format: "jsonl"}},
	{"ce", Options{Format: "ce"}},
	{"data", Options{Format: "data"}},
	{"pretty", Options{Format: "pretty"}},
	{"pretty_color", Options{Format: "pretty", Color: true}},
	{"template", Options{Format: "template", Template: goldenTemplate}},
	{"jsonl_fields", Options{Format: "jsonl", Fields: []string{"cursor", "event", "data.type", "data.data.user.id", "data.value.height", "no.such"}}},
	{"ce_fields", Options{Format: "ce", Fields: []string{"id", "time", "data", "value.header.chain_id", "data.a b"}}},
	{"data_fields", Options{Format: "data", Fields: []string{"user.id", "height", "@this|@reverse"}}},
}

func TestGolden(t *testing.T) {
	items := loadItems(t)
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			got := render(t, tc.opts, items...)
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
				for i := range min(len(gl), len(wl)) {
					if gl[i] != wl[i] {
						t.Fatalf("%s line %d differs (run with -update to accept):\n got %q\nwant %q", path, i+1, gl[i], wl[i])
					}
				}
				t.Fatalf("%s: %d lines, want %d (run with -update to accept)", path, len(gl), len(wl))
			}
			if n := strings.Count(got, "\n"); n != len(items) {
				t.Errorf("%d lines for %d items", n, len(items))
			}
		})
	}
}

// TestFormatsByHand pins the outputs that matter most without relying on goldens.
func TestFormatsByHand(t *testing.T) {
	items := loadItems(t)
	line := func(opts Options, i int) string {
		return strings.TrimSuffix(render(t, opts, items[i]), "\n")
	}
	tests := []struct {
		opts Options
		item int
		want string
	}{
		{Options{Format: "pretty"}, 0, `2026-11-22T10:00:00Z  org.openedx.learning.course.enrollment.created.v1  openedx/lms/web  course-v1:edX+DemoX  a1  {"user":{"id":42}}`},
		{Options{Format: "pretty"}, 2, `2026-11-22T10:00:02Z  org.openedx.learning.auth.session.ended.v1  openedx/lms/web  user:42  c3`},
		{Options{Format: "pretty"}, 3, `2026-11-22T13:39:11.957467136Z  org.openedx.learning.student.registration.completed.v1  openedx/lms/web  d4  {"user":{"id":12345678901234567890,"score":1.50,"name":"Zoë <z@x>"}}`},
		{Options{Format: "pretty"}, 4, `2026-11-22T13:39:11.957311084Z  Tx  {"height":202,"tx":"dXNlcjM9YWxpY2Uz","result":{"events":[{"type":"app","attributes":[{"key":"creator","value":"Cosmosh…`},
		{Options{Format: "pretty"}, 6, `2026-11-22T12:00:00+02:00  org.example.spaced.v1  /spaced  e5  {"a b":[1,2.0,"x  y"],"c":null}`},
		{Options{Format: "pretty"}, 7, `2026-11-22T13:39:11.957598208Z  org.example.\u001b[31mred.v1  /evil  abc\u202edef  f6\u0007  {"csi":"\u009b2J","long":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…`},
		{Options{Format: "data"}, 0, `{"user":{"id":42}}`},
		{Options{Format: "data"}, 1, `"aGVsbG8Kd29ybGQ="`},
		{Options{Format: "data"}, 2, `null`},
		{Options{Format: "data"}, 3, `{"user":{"id":12345678901234567890,"score":1.50,"name":"Zoë <z@x>"}}`},
		{Options{Format: "data"}, 4, `{"height":202,"tx":"dXNlcjM9YWxpY2Uz","result":{"events":[{"type":"app","attributes":[{"key":"creator","value":"Cosmoshi Netowoko","index":true},{"key":"key","value":"user3","index":true},{"key":"index_key","value":"index is working","index":true},{"key":"noindex_key","value":"index is working","index":false}]}]}}`},
		{Options{Format: "data"}, 6, `{"a b":[1,2.0,"x  y"],"c":null}`},
		{Options{Format: "data"}, 9, `[1,2,3]`},
		{Options{Format: "ce"}, 4, `{"type":"tendermint/event/Tx","value":{"height":202,"tx":"dXNlcjM9YWxpY2Uz","result":{"events":[{"type":"app","attributes":[{"key":"creator","value":"Cosmoshi Netowoko","index":true},{"key":"key","value":"user3","index":true},{"key":"index_key","value":"index is working","index":true},{"key":"noindex_key","value":"index is working","index":false}]}]}}}`},
		{Options{Format: "ce"}, 6, `{"specversion":"1.0","id":"e5","source":"/spaced","type":"org.example.spaced.v1","time":"2026-11-22T12:00:00+02:00","data":{"a b":[1,2.0,"x  y"],"c":null}}`},
		{Options{Format: "jsonl"}, 6, `{"cursor":"18ea61a27c3d0000-00000000000000cb","event":"org.example.spaced.v1","data":{"specversion":"1.0","id":"e5","source":"/spaced","type":"org.example.spaced.v1","time":"2026-11-22T12:00:00+02:00","data":{"a b":[1,2.0,"x  y"],"c":null}}}`},
		{Options{Format: "jsonl", Fields: []string{"cursor", "data.data.user.id", "data.nope"}}, 3, `{"cursor":"18ea61a27c3c0000-00000000000000ca","data.data.user.id":12345678901234567890,"data.nope":null}`},
		{Options{Format: "ce", Fields: []string{"data.a b", "id"}}, 6, `{"data.a b":[1,2.0,"x  y"],"id":"e5"}`},
		{Options{Format: "data", Fields: []string{"user"}}, 0, `{"user":{"id":42}}`},
		{Options{Format: "data", Fields: []string{"step", "round"}}, 8, `{"step":"RoundStepNewHeight","round":0}`},
	}
	for _, tc := range tests {
		if got := line(tc.opts, tc.item); got != tc.want {
			t.Errorf("%s%v item %d:\n got %s\nwant %s", tc.opts.Format, tc.opts.Fields, tc.item, got, tc.want)
		}
	}
}

// TestJSONLExact checks that every jsonl line is the item as sent, compacted.
func TestJSONLExact(t *testing.T) {
	items := loadItems(t)
	lines := strings.Split(render(t, Options{Format: "jsonl"}, items...), "\n")
	for i, it := range items {
		var want bytes.Buffer
		if err := json.Compact(&want, it.Raw); err != nil {
			t.Fatal(err)
		}
		if lines[i] != want.String() {
			t.Errorf("item %d:\n got %s\nwant %s", i, lines[i], want.String())
		}
	}
}

func TestItemWithoutRaw(t *testing.T) {
	it := client.Item{Item: wire.Item{Cursor: "18ea61a27c39abd8-00c7", Event: "a\"b<", Data: json.RawMessage(`{"x": 1}`)}}
	if got, want := render(t, Options{}, it), `{"cursor":"18ea61a27c39abd8-00c7","event":"a\"b<","data":{"x":1}}`+"\n"; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	it.Data = nil
	if got, want := render(t, Options{Format: "ce"}, it), "null\n"; got != want {
		t.Errorf("ce of no data: got %q want %q", got, want)
	}
	if got, want := render(t, Options{Format: "template", Template: `{{item "event"}}|{{.Data}}`}, it), "a\"b<|<no value>\n"; got != want {
		t.Errorf("template: got %q want %q", got, want)
	}
}

func TestColor(t *testing.T) {
	items := loadItems(t)
	for _, tc := range goldenCases {
		if tc.opts.Color {
			continue
		}
		if tc.opts.Format == "template" {
			// a template prints values as they are; the json helper escapes them.
			tc.opts.Template = `{{.Cursor}} {{json .Type}} {{json .Data}}`
		}
		if out := render(t, tc.opts, items...); strings.IndexByte(out, 0x1b) >= 0 {
			t.Errorf("%s: ESC in output without colour", tc.name)
		}
	}
	out := render(t, Options{Format: "pretty", Color: true}, items[0])
	want := styleTime + "2026-11-22T10:00:00Z" + styleReset + "  " +
		styleType + "org.openedx.learning.course.enrollment.created.v1" + styleReset +
		"  openedx/lms/web  course-v1:edX+DemoX  " + styleID + "a1" + styleReset + `  {"user":{"id":42}}` + "\n"
	if out != want {
		t.Errorf("coloured line:\n got %q\nwant %q", out, want)
	}
	if styleTime == styleType || styleType == styleID || styleTime == styleID {
		t.Error("time, type and id share a colour")
	}
	// Only our own escapes: the ESC in item 7's type is shown as text.
	out = render(t, Options{Format: "pretty", Color: true}, items[7])
	if n, want := strings.Count(out, "\x1b"), 6; n != want {
		t.Errorf("%d ESC bytes in %q, want %d", n, out, want)
	}
}

func TestTemplate(t *testing.T) {
	items := loadItems(t)
	tests := []struct {
		tmpl string
		item int
		want string
	}{
		{`{{.ID}}`, 0, "a1\n"},
		{"{{.ID}}\n", 0, "a1\n"}, // no second newline
		{`{{if eq .Type "nope"}}x{{end}}`, 0, ""},
		{`{{json .Data}}`, 3, `{"data":{"user":{"id":12345678901234567890,"name":"Zoë <z@x>","score":1.50}},"datacontenttype":"application/json","id":"d4","minorversion":0,"pii":"true","source":"openedx/lms/web","sourcehost":"lms-1","specversion":"1.0","type":"org.openedx.learning.student.registration.completed.v1"}` + "\n"},
		{`{{.Payload.user.id}} {{printf "%T" .Payload.user.id}}`, 0, "42 json.Number\n"},
		{`{{pretty .Payload}}`, 0, "{\n  \"user\": {\n    \"id\": 42\n  }\n}\n"},
		{`{{.Payload}}|{{json .Payload}}|{{.DataContentType}}`, 1, "hello\nworld|\"aGVsbG8Kd29ybGQ=\"|text/plain\n"},
		{`{{json .Payload}}`, 2, "null\n"},
		{`{{.Payload.height}} {{.Data.type}} {{.Event}} {{.CloudEvent}} [{{.ID}}]`, 4, "202 tendermint/event/Tx Tx false []\n"},
		{`{{get "value.header.chain_id"}} {{get "value.num_txs"}} {{get "nope"}}|`, 5, "test-chain-kVYgsM 1 |\n"},
		{`{{get "value.header.time" | time "2006-01-02 15:04"}}`, 5, "2026-11-22 13:39\n"},
		{`{{get "data.user.id"}} {{get "id"}} {{get "subject"}} {{get "data"}}`, 0, "42 a1 course-v1:edX+DemoX {\"user\":{\"id\":42}}\n"},
		{`{{item "data.data.user.id"}} {{item "cursor"}} {{item "event"}} {{get "cursor"}}|`, 0, "42 18ea61a27c39abd8-00000000000000c7 org.openedx.learning.course.enrollment.created.v1 |\n"},
		{`{{get "0"}}{{get "#"}} {{item "data.1"}}`, 9, "13 2\n"},
		{`{{with .Payload}}{{.user.id}}{{end}} {{range $k, $v := .Data}}{{if eq $k "id"}}{{$v}} {{$.ID}}{{end}}{{end}}`, 0, "42 a1 a1\n"},
		{`{{.Time | time "15:04 MST"}} {{.CursorTime.UnixNano}}`, 6, "12:00 +0200 1795354751957532672\n"},
		{`{{.Time | time "15:04"}}|{{.Subject | default "none"}}|{{.Payload.c | default "nil"}}|{{.Payload.zz | default 7}}`, 3, "|none|nil|7\n"},
		{`{{.Payload.c | default "nil"}} {{index .Payload "a b" | len}}`, 6, "nil 3\n"},
		{`{{trunc 5 .Type}} {{trunc -2 .Type}} {{trunc 99 .ID}} {{upper .ID}} {{lower "ÄB"}}`, 0, "org.o v1 a1 A1 äb\n"},
		{`{{trunc 3 "zöëx"}}`, 0, "zöë\n"},
		{`{{.Raw}}`, 9, `{"cursor":"18ea61a27c3f0000-00c8","event":"Odd","data":[1,2,3]}` + "\n"},
		{`{{range .Data}}{{.}},{{end}}`, 9, "1,2,3,\n"},
	}
	for _, tc := range tests {
		got := render(t, Options{Format: "template", Template: tc.tmpl}, items[tc.item])
		if got != tc.want {
			t.Errorf("%s on item %d:\n got %q\nwant %q", tc.tmpl, tc.item, got, tc.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		opts Options
		want string // in the error
	}{
		{Options{Format: "xml"}, `unknown output format "xml"`},
		{Options{Format: "JSONL"}, `unknown output format "JSONL"`},
		{Options{Format: "template"}, "needs a template"},
		{Options{Format: "template", Template: "{{.ID"}, "invalid template"},
		{Options{Format: "template", Template: "{{nosuch .ID}}"}, `function "nosuch" not defined`},
		{Options{Format: "jsonl", Template: "{{.ID}}"}, "template goes with output format template"},
		{Options{Format: "pretty", Fields: []string{"id"}}, "fields go with output formats jsonl, ce and data"},
		{Options{Format: "template", Template: "x", Fields: []string{"id"}}, "fields go with"},
		{Options{Fields: []string{"a", "a"}}, `"a" is given twice`},
		{Options{Fields: []string{""}}, "field path is empty"},
		{Options{Fields: []string{"ok", "a["}}, `lacks a closing ']'`},
		{Options{Fields: []string{"a]"}}, `unbalanced ']'`},
		{Options{Fields: []string{"a.#(b==1]"}}, `unbalanced ']'`},
		{Options{Fields: []string{"{a,b"}}, `lacks a closing '}'`},
		{Options{Fields: []string{`a.#(b=="x)`}}, "unterminated string"},
		{Options{Fields: []string{"a..b"}}, "empty component"},
		{Options{Fields: []string{".a"}}, "empty component"},
		{Options{Fields: []string{"a."}}, "empty component"},
		{Options{Fields: []string{"a|"}}, "empty component"},
		{Options{Fields: []string{`a\`}}, "ends with an escape"},
	}
	for _, tc := range tests {
		_, err := New(&bytes.Buffer{}, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	for _, p := range []string{"cursor", "data.data.user.id", `data.fav\.movie`, "data.value.result.events.#.type",
		`friends.#(last=="Mur)phy").first`, `{cursor,data.id}`, "[cursor,event]", "@this", `@pretty:{"indent":"\t"}`,
		"data|@reverse", "children.1", "c?ildren.0", "a b"} {
		if _, err := New(&bytes.Buffer{}, Options{Fields: []string{p}}); err != nil {
			t.Errorf("field %q refused: %v", p, err)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("New with a nil writer succeeded")
	}
}

func TestItemErrors(t *testing.T) {
	items := loadItems(t)
	for _, tmpl := range []string{`{{template "t" .}}{{define "t"}}{{.Nope}}{{end}}`, `{{index .Payload 9}}`, `{{.Time | time "15:04"}}{{get "a["}}`, `{{time "15" .Source}}`} {
		var out bytes.Buffer
		r, err := New(&out, Options{Format: "template", Template: "before " + tmpl})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Item(items[0])
		if err == nil || !strings.Contains(err.Error(), items[0].Cursor) {
			t.Errorf("%s: error %v does not name cursor %s", tmpl, err, items[0].Cursor)
		}
		if err := r.Flush(); err != nil || out.Len() != 0 {
			t.Errorf("%s: flush %v, output %q", tmpl, err, out.String())
		}
	}
	// A failed item writes nothing, and the renderer goes on.
	var out bytes.Buffer
	r, err := New(&out, Options{Format: "template", Template: `{{.ID}} {{if not .CloudEvent}}{{template "n" .}}{{end}}{{define "n"}}{{.Nope}}{{end}}`})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Item(items[9])
	if err == nil || !strings.Contains(err.Error(), `"18ea61a27c3f0000-00c8"`) ||
		!strings.Contains(err.Error(), "an event has no field .Nope; it has .Cursor .Event .CloudEvent .ID") || strings.Contains(err.Error(), "render.view") {
		t.Errorf("error %v does not name the cursor, the field and those there are", err)
	}
	if err := r.Item(items[0]); err != nil {
		t.Error(err)
	}
	if err := r.Flush(); err != nil || out.String() != "a1 \n" {
		t.Errorf("flush %v, output %q", err, out.String())
	}
	// Broken JSON that needs compacting is refused with the cursor, not written.
	out.Reset()
	r, _ = New(&out, Options{})
	err = r.Item(client.Item{Item: wire.Item{Cursor: "c1"}, Raw: json.RawMessage(`{"a": [1,}`)})
	if err == nil || !strings.Contains(err.Error(), `"c1"`) {
		t.Errorf("broken JSON: %v", err)
	}
	if err := r.Flush(); err != nil || out.Len() != 0 {
		t.Errorf("broken JSON: flush %v, output %q", err, out.String())
	}
}

// failWriter fails every write, as a pipe does once its reader has gone.
type failWriter struct{ writes int }

func (w *failWriter) Write(p []byte) (int, error) {
	w.writes++
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
}

func TestWriteErrors(t *testing.T) {
	items := loadItems(t)
	for _, format := range []string{"jsonl", "pretty", "template"} {
		w := &failWriter{}
		r, err := New(w, Options{Format: format, Template: map[bool]string{true: "{{.ID}}"}[format == "template"]})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if err := r.Item(it); err != nil {
				t.Fatalf("%s: Item buffered yet failed: %v", format, err)
			}
		}
		if w.writes != 0 {
			t.Errorf("%s: %d writes before Flush", format, w.writes)
		}
		if err := r.Flush(); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("%s: Flush = %v, want EPIPE", format, err)
		}
		if err := r.Flush(); !errors.Is(err, syscall.EPIPE) {
			t.Errorf("%s: second Flush = %v, want EPIPE", format, err)
		}
	}
	// Items that overflow the buffer report the error from Item.
	w := &failWriter{}
	r, _ := New(w, Options{})
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		err = r.Item(items[5])
	}
	if !errors.Is(err, syscall.EPIPE) {
		t.Errorf("Item after the buffer filled = %v, want EPIPE", err)
	}
}

func TestFormats(t *testing.T) {
	fs := Formats()
	if strings.Join(fs, ",") != "jsonl,pretty,ce,data,template" {
		t.Errorf("Formats() = %v", fs)
	}
	fs[0] = "changed"
	if Formats()[0] != "jsonl" {
		t.Error("Formats shares its slice")
	}
	for _, f := range Formats() {
		opts := Options{Format: f}
		if f == "template" {
			opts.Template = "{{.Cursor}}"
		}
		if _, err := New(&bytes.Buffer{}, opts); err != nil {
			t.Errorf("New(%s): %v", f, err)
		}
	}
}

func TestIsCompact(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{`{"a":1}`, true},
		{`{"a b":"c d"}`, true},
		{`{"a": 1}`, false},
		{`{"a":"x\" y"}`, true},
		{`{"a":"x\\" ,"b":1}`, false},
		{`{"a":"x\\"}`, true},
		{"{\"a\":\"\t\"}", false}, // a raw tab in a string is not valid JSON; Compact decides
		{"[1,\n2]", false},
		{" 1", false},
		{"", true},
	}
	for _, tc := range tests {
		if got := isCompact(tc.in); got != tc.want {
			t.Errorf("isCompact(%q) = %v", tc.in, got)
		}
	}
}

func TestAppendDisplay(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		json  bool
		want  string
	}{
		{"abc", 3, false, "abc"},
		{"abcd", 3, false, "ab…"},
		{"a\x1bb", 0, false, `a\u001bb`},
		{"a\x1bb", 6, false, "a…"},
		{"a\xffb", 0, false, "a\ufffdb"},
		{"\u2028\u009b", 0, false, `\u2028\u009b`},
		{`{"a": [1, 2], "b c": "d  e"}`, 0, true, `{"a":[1,2],"b c":"d  e"}`},
		{`{"a":"\"  "}`, 0, true, `{"a":"\"  "}`},
		{`{"a":"\\"  }`, 0, true, `{"a":"\\"}`},
		{"ööööö", 4, false, "ööö…"},
		{"öööö", 4, false, "öööö"},
	}
	for _, tc := range tests {
		if b, _ := appendDisplay(nil, tc.in, tc.limit, tc.json); string(b) != tc.want {
			got := string(b)
			t.Errorf("appendDisplay(%q, %d, %v) = %q, want %q", tc.in, tc.limit, tc.json, got, tc.want)
		}
	}
}

// A template that names a field an event lacks, or a function that does not exist, is
// refused before any event, with the list of those there are.
func TestTemplateNames(t *testing.T) {
	fields := "it has .Cursor .Event .CloudEvent .ID .Type .Source .Subject .Time .DataContentType .Data .Payload .Raw .CursorTime"
	for _, tc := range []struct {
		tmpl, want string // want "" for a template that is fine
	}{
		{`{{.Nope}}`, "invalid template: an event has no field .Nope; " + fields},
		{`{{.id}}`, "an event has no field .id (did you mean .ID?); " + fields},
		{`{{.Payload.nope}} {{.Data.anything}} {{.CursorTime.Unix}}`, ""},
		{`{{if .CloudEvent}}{{.Typ}}{{end}}`, "no field .Typ (did you mean .Type?)"},
		{`{{range .Data}}{{.Nope}}{{end}}`, ""},
		{`{{range .Data}}{{$.Nope}}{{end}}`, "no field .Nope"},
		{`{{with .Payload}}{{.user}}{{else}}{{.Nope}}{{end}}`, "no field .Nope"},
		{`{{with .Payload}}{{.user}}{{end}}{{.Nope}}`, "no field .Nope"},
		{`{{(.Nope).x}}`, "no field .Nope"},
		{`{{$x := .Nope}}`, "no field .Nope"},
		{`{{json .Nope | upper}}`, "no field .Nope"},
		{`{{template "t" .}}{{define "t"}}{{.Whatever}}{{end}}`, ""}, // checked when it runs
		{`{{nosuch .ID}}`, `function "nosuch" not defined; the functions are json pretty get item time upper lower trunc default and text/template's own`},
	} {
		_, err := New(&bytes.Buffer{}, Options{Format: "template", Template: tc.tmpl})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.tmpl, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.tmpl, err, tc.want)
		}
	}
}

// viewFields are every field and method a template finds on dot.
func TestViewFields(t *testing.T) {
	var names []string
	vt := reflect.TypeOf(&view{})
	for i := range vt.Elem().NumField() {
		if f := vt.Elem().Field(i); f.IsExported() {
			names = append(names, f.Name)
		}
	}
	for i := range vt.NumMethod() {
		names = append(names, vt.Method(i).Name)
	}
	slices.Sort(names)
	want := slices.Clone(viewFields)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("dot has %v; viewFields lists %v", names, want)
	}
}
