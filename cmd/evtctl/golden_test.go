package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/pkg/wire"
)

// goldenDir holds what replay and tail write for the fixture log, byte for byte.
// EVTCTL_UPDATE_GOLDEN=1 rewrites the files.
const goldenDir = "../../testdata/replay"

// fixtureRequest is one ingest request of the fixture log.
type fixtureRequest struct {
	headers map[string]string
	body    string
}

func structured(body string) fixtureRequest {
	return fixtureRequest{headers: map[string]string{"Content-Type": "application/cloudevents+json"}, body: body}
}

func binary(id, ct, body string, ext ...string) fixtureRequest {
	h := map[string]string{
		"ce-specversion": "1.0", "ce-id": id, "ce-source": "/fixture/binary",
		"ce-type": "org.example.fixture.binary.sent.v1", "ce-time": "2026-01-02T03:04:05.123456789Z",
	}
	if ct != "" {
		h["Content-Type"] = ct
	}
	for i := 0; i+1 < len(ext); i += 2 {
		h[ext[i]] = ext[i+1]
	}
	return fixtureRequest{headers: h, body: body}
}

// fixtureRequests make a log with every kind of stored event a replay must write as it
// is: structured events (compact as stored), binary-mode JSON bodies stored as sent (with
// newlines, tabs, carriage returns and spaces), text and bytes, unicode and escapes,
// extensions of every type, events without data, and one large event.
func fixtureRequests() []fixtureRequest {
	reqs := []fixtureRequest{
		structured(`{"specversion":"1.0","id":"s1","source":"https://shop.example.com/orders","type":"org.example.shop.order.purchased.v1",` +
			`"subject":"order-1","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","minorversion":0,"pii":false,` +
			`"data":{"total":12.50,"currency":"EUR","items":[{"sku":"a","n":1},{"sku":"b","n":2}],"note":null}}`),
		structured(`{ "specversion" : "1.0", "id" : "s2", "source" : "/fixture/spaces", "type" : "org.example.fixture.spaced.sent.v1",
			"data" : { "a b" : "c d", "list" : [ 1 , 2 , 3 ] } }`),
		structured(`{"specversion":"1.0","id":"s3-ünïcödé","source":"/fixture/unicode","type":"org.example.fixture.unicode.sent.v1",` +
			`"subject":"日本語 🎉","data":{"text":"ünïcödé 日本 🎉","esc":"quote \" backslash \\ tab \t newline \n cr \r","u":"\u00e9\u2028\ud83c\udf89","slash":"\/x"}}`),
		structured(`{"specversion":"1.0","id":"s4","source":"/fixture/base64","type":"org.example.fixture.bytes.sent.v1",` +
			`"datacontenttype":"application/octet-stream","data_base64":"AAECA/7/SGVsbG8KV29ybGQ="}`),
		structured(`{"specversion":"1.0","id":"s5","source":"/fixture/nodata","type":"org.example.fixture.empty.sent.v1","comexampleext":"v","count":42,"flag":true}`),
		structured(`{"specversion":"1.0","id":"s6","source":"/fixture/scalar","type":"org.example.fixture.scalar.sent.v1","data":"just a string with \"quotes\""}`),
		structured(`{"specversion":"1.0","id":"s7","source":"/fixture/scalar","type":"org.example.fixture.scalar.sent.v1","data":-1.5e3}`),
		structured(`{"specversion":"1.0","id":"s8","source":"/fixture/scalar","type":"org.example.fixture.scalar.sent.v1","data":null}`),
		structured(`{"specversion":"1.0","id":"s9","source":"/fixture/scalar","type":"org.example.fixture.scalar.sent.v1","data":[1,"two",{"three":3},[],{}]}`),
		binary("b1", "application/json", "{\n  \"pretty\": true,\n  \"nested\": {\n    \"list\": [\n      1,\n      2\n    ]\n  },\n  \"text\": \"a b\\nc\"\n}\n", "ce-subject", "multi line"),
		binary("b2", "application/json", "{\"tabs\":\t[1,\t2],\r\n\"crlf\": \"x\"}\r\n"),
		binary("b3", "application/json", `{"a": 1, "b" : [1, 2], "s": "spaces inside stay"}`),
		binary("b4", "application/json", "  [ 1 ,\n 2 ]  "),
		binary("b5", "text/plain; charset=utf-8", "line one\nline two\ttabbed \"quoted\" ünï\n"),
		binary("b6", "application/octet-stream", "\x00\x01\x02binary\n\xff\xfe"),
		binary("b7", "application/vnd.fixture+json", "{\"plus\":\"json\",\n\"n\":[{\"x\": {}}]}", "ce-comexampleext", "with space", "ce-pii", "true"),
		binary("b8", "application/json", "\"a JSON string body\\nwith an escape\""),
		binary("b9", "", "{\"no\": \"content type\"}"),
		{headers: map[string]string{"Content-Type": "application/cloudevents-batch+json"}, body: `[` +
			`{"specversion":"1.0","id":"p1","source":"/fixture/batch","type":"org.example.fixture.batch.sent.v1","data":{"i":1}},` +
			`{"specversion":"1.0","id":"p2","source":"/fixture/batch","type":"org.example.fixture.batch.sent.v1","data":{"i":2},"minorversion":3},` +
			`{"specversion":"1.0","id":"p3","source":"/fixture/batch","type":"org.example.fixture.batch.sent.v1","data_base64":""}]`},
	}
	big := strings.Repeat(`{"k":"`+strings.Repeat("x", 90)+`","v":[1,2,3]},`, 120)
	reqs = append(reqs,
		structured(`{"specversion":"1.0","id":"big","source":"/fixture/big","type":"org.example.fixture.big.sent.v1","data":[`+big+`0]}`),
		binary("b10", "application/json", "[\n"+strings.ReplaceAll(big, ",", ",\n ")+"0\n]"),
	)
	for i := range 7 {
		reqs = append(reqs, structured(fmt.Sprintf(`{"specversion":"1.0","id":"t%d","source":"/fixture/tail","type":"org.example.fixture.tail.sent.v1","data":{"n":%d}}`, i, i)))
	}
	return reqs
}

// fixtureNode serves the fixture log, every event stamped at the same instant so that
// cursors come out the same on every run. wrap, when set, stands between the client and
// the node.
func fixtureNode(t *testing.T, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	url, _ := inProcessNode(t, eventlog.Options{Now: func() time.Time { return at }}, server.Config{MaxItems: 1000}, wrap)
	for i, fr := range fixtureRequests() {
		req, err := http.NewRequest(http.MethodPost, url+"/events", strings.NewReader(fr.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range fr.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("fixture request %d: %d %s", i, resp.StatusCode, b.String())
		}
	}
	return url
}

// golden compares got with the golden file name, or rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(goldenDir, name)
	if os.Getenv("EVTCTL_UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (EVTCTL_UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "", ""
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from %s at line %d:\n got %q\nwant %q", name, path, i+1, g, w)
			}
		}
		t.Fatalf("%s differs from %s", name, path)
	}
}

// What replay and tail write for a log is the same byte for byte whatever the page size,
// and the same as it was: each line one item, with stored JSON that holds newlines and
// spaces compacted onto it, and everything else exactly as the node stored it.
func TestReplayGolden(t *testing.T) {
	t.Parallel()
	stream := fixtureNode(t, nil)
	paged := fixtureNode(t, hideStream) // as a node from before the stream
	cases := []struct {
		golden string
		args   []string
	}{
		{"jsonl.golden", []string{"replay", "-o", "jsonl"}},
		{"ce.golden", []string{"replay", "-o", "ce"}},
		{"data.golden", []string{"replay", "-o", "data"}},
		{"typed.golden", []string{"replay", "-o", "jsonl", "--type", "org.example.fixture.binary.*.*"}},
		{"reverse.golden", []string{"replay", "-o", "jsonl", "--reverse"}},
		{"tail.golden", []string{"tail", "--from-start", "--until-caught-up", "-o", "jsonl"}},
		{"tail_ce.golden", []string{"tail", "--from-start", "--until-caught-up", "-o", "ce"}},
		{"tail_data.golden", []string{"tail", "--from-start", "--until-caught-up", "-o", "data"}},
	}
	for _, tc := range cases {
		for _, page := range []string{"", "1", "4", "paged", "paged1"} {
			url := stream
			if rest, ok := strings.CutPrefix(page, "paged"); ok {
				url, page = paged, rest
			}
			args := append([]string{"--node", url}, tc.args...)
			if page != "" {
				args = append(args, "--page-size", page)
			}
			code, out, stderr := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, stderr)
			}
			if page != "" && os.Getenv("EVTCTL_UPDATE_GOLDEN") == "1" {
				continue // the golden files come from the default page size
			}
			t.Run(tc.golden+"/"+url+"/page="+page, func(t *testing.T) { golden(t, tc.golden, out) })
		}
	}
}

// hideStream stands for a node that has no stream: it neither advertises nor serves it.
func hideStream(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wire.PathStream {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(noStreamWriter{w}, r)
	})
}

type noStreamWriter struct{ http.ResponseWriter }

func (w noStreamWriter) WriteHeader(code int) {
	w.Header().Del(wire.HeaderStream)
	w.ResponseWriter.WriteHeader(code)
}

func (w noStreamWriter) Write(b []byte) (int, error) {
	w.Header().Del(wire.HeaderStream)
	return w.ResponseWriter.Write(b)
}
