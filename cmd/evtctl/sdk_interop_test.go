package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ceclient "github.com/cloudevents/sdk-go/v2/client"
	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// The interop tests put evtctl between real sdk-go v2 clients and receivers, which send
// ce- header values unencoded and do not decode them.

const interopText = `say "hi" now, 100% sure`

// interopExtensions are extensions of every CloudEvents type, as set with sdk-go. The strings
// hold a space, '"' and '%' (never %XX with two hex digits: a sender that does not encode
// cannot be told from one that does on such a value, and evtctl decodes it).
func interopExtensions() map[string]any {
	return map[string]any{
		"text":                 interopText,
		"comexampleextension2": `{"othervalue": 5}`,
		"pct":                  "100%",
		"integer":              int32(42),
		"negative":             int32(-7),
		"boolean":              true,
		"uri":                  *types.ParseURI("https://example.com/a/b?c=d&e=f"),
		"uriref":               *types.ParseURIRef("/relative/path?q=1#frag"),
		"ts":                   types.Timestamp{Time: time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)},
	}
}

// interopData is a JSON body with a trailing newline, as json.Encoder writes it.
const interopData = "{\"msg\": \"hello\", \"n\": [1, 2]}\n"

// sdkInteropEvents are the events an sdk-go client sends: one with JSON data and every
// extension, one with XML data.
func sdkInteropEvents(t *testing.T, prefix string) []event.Event {
	t.Helper()
	e := event.New()
	e.SetID(prefix + "-json")
	e.SetSource("https://example.com/sources/a?b=c")
	e.SetType("org.example.interop.v1")
	e.SetSubject(interopText)
	e.SetTime(time.Date(2026, 11, 22, 9, 30, 0, 5e8, time.UTC))
	e.SetDataSchema("https://example.com/schema.json")
	for k, v := range interopExtensions() {
		e.SetExtension(k, v)
	}
	if err := e.SetData("application/json", []byte(interopData)); err != nil {
		t.Fatal(err)
	}
	x := event.New()
	x.SetID(prefix + "-xml")
	x.SetSource("/sources/xml")
	x.SetType("org.example.interop.xml.v1")
	x.SetTime(time.Date(2026, 11, 22, 9, 31, 0, 0, time.UTC)) // emit --file would add one
	x.SetExtension("text", interopText)
	if err := x.SetData("application/xml", []byte("<note a=\"1\">hi</note>\n")); err != nil {
		t.Fatal(err)
	}
	return []event.Event{e, x}
}

// startInteropNode runs an evtctl node over an in-memory log and returns its URL.
func startInteropNode(t *testing.T) string {
	t.Helper()
	st, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := server.New(server.Config{Store: st})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		ts.Close()
		st.Close()
	})
	return ts.URL
}

// sendWithSDK sends events to the node with an sdk-go HTTP client, in binary mode or
// (structured) in structured mode.
func sendWithSDK(t *testing.T, node string, structured bool, evs []event.Event) {
	t.Helper()
	opts := []ceclient.Option{}
	if structured {
		opts = append(opts, ceclient.WithForceStructured())
	}
	p, err := cehttp.New(cehttp.WithTarget(node + "/events"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ceclient.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if res := c.Send(context.Background(), e); !protocol.IsACK(res) {
			t.Fatalf("sdk-go sent %s: %v", e.ID(), res)
		}
	}
}

// replayCE reads the node's events with `evtctl replay -o ce`, by id.
func replayCE(t *testing.T, node string) (map[string]map[string]any, string) {
	t.Helper()
	code, out, errOut := runCLI(t, "replay", "--node", node, "-o", "ce")
	if code != 0 {
		t.Fatalf("replay: exit %d: %s", code, errOut)
	}
	evs := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(line))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("replay line %q: %v", line, err)
		}
		evs[m["id"].(string)] = m
	}
	return evs, out
}

// canonical is the string form of a stored JSON value: a string as it is, a number or a
// boolean as its literal.
func canonical(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// An sdk-go client sends binary and structured events with extensions of every type to a
// node; `evtctl replay -o ce` reads every value back exactly. Binary mode carries
// extensions as strings, structured mode keeps their JSON types.
func TestSDKClientToNodeReplay(t *testing.T) {
	t.Parallel()
	node := startInteropNode(t)
	sendWithSDK(t, node, false, sdkInteropEvents(t, "bin"))
	sendWithSDK(t, node, true, sdkInteropEvents(t, "str"))
	got, out := replayCE(t, node)
	if len(got) != 4 {
		t.Fatalf("replay -o ce gave %d events:\n%s", len(got), out)
	}
	for _, prefix := range []string{"bin", "str"} {
		ev := got[prefix+"-json"]
		if ev == nil {
			t.Fatalf("no event %s-json:\n%s", prefix, out)
		}
		want := map[string]any{
			"specversion": "1.0", "id": prefix + "-json", "source": "https://example.com/sources/a?b=c",
			"type": "org.example.interop.v1", "subject": interopText, "time": "2026-11-22T09:30:00.5Z",
			"dataschema": "https://example.com/schema.json", "datacontenttype": "application/json",
		}
		for k, v := range interopExtensions() {
			s, err := types.Format(v)
			if err != nil {
				t.Fatal(err)
			}
			want[k] = s
			if prefix == "str" {
				switch v.(type) {
				case int32:
					want[k] = json.Number(s)
				case bool:
					want[k] = v
				}
			}
		}
		for k, w := range want {
			if ev[k] != w {
				t.Errorf("%s-json: %s = %#v, want %#v", prefix, k, ev[k], w)
			}
		}
		// sdk-go sends []byte data raw in binary mode and as data_base64 in structured
		// mode; either way the bytes are kept (replay -o ce prints JSON compact).
		switch prefix {
		case "bin":
			if b, _ := json.Marshal(ev["data"]); string(b) != `{"msg":"hello","n":[1,2]}` {
				t.Errorf("bin-json: data %s", b)
			}
		case "str":
			if ev["data_base64"] != "eyJtc2ciOiAiaGVsbG8iLCAibiI6IFsxLCAyXX0K" {
				t.Errorf("str-json: data_base64 %v", ev["data_base64"])
			}
		}
		for k := range ev {
			if _, ok := want[k]; !ok && k != "data" && k != "data_base64" {
				t.Errorf("%s-json: unexpected member %s", prefix, k)
			}
		}
	}
	// XML data from a binary request is stored as text.
	if x := got["bin-xml"]; x["data"] != "<note a=\"1\">hi</note>\n" || x["text"] != interopText || x["datacontenttype"] != "application/xml" {
		t.Errorf("bin-xml: %v", x)
	}
}

// sdkReceived is what an sdk-go receiver saw of one event: every attribute in its
// canonical string form, and the data.
type sdkReceived struct {
	attrs map[string]string
	data  []byte
}

// startSDKReceiver runs an sdk-go receiver (client.StartReceiver) and returns its URL and
// what it has seen so far, by id.
func startSDKReceiver(t *testing.T) (string, func() map[string][]sdkReceived) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := cehttp.New(cehttp.WithListener(ln))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ceclient.New(p)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string][]sdkReceived{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := c.StartReceiver(ctx, func(e event.Event) protocol.Result {
			r := sdkReceived{attrs: map[string]string{
				"specversion": e.SpecVersion(), "id": e.ID(), "source": e.Source(), "type": e.Type(),
				"subject": e.Subject(), "dataschema": e.DataSchema(), "datacontenttype": e.DataContentType(),
			}, data: e.Data()}
			if !e.Time().IsZero() {
				r.attrs["time"] = types.FormatTime(e.Time())
			}
			for k, v := range e.Extensions() {
				s, err := types.Format(v)
				if err != nil {
					return fmt.Errorf("extension %s: %w", k, err)
				}
				r.attrs[k] = s
			}
			for k, v := range r.attrs {
				if v == "" && k != "text" {
					delete(r.attrs, k)
				}
			}
			mu.Lock()
			seen[e.ID()] = append(seen[e.ID()], r)
			mu.Unlock()
			return protocol.ResultACK
		})
		if err != nil {
			t.Errorf("sdk-go receiver: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "http://" + ln.Addr().String(), func() map[string][]sdkReceived {
		mu.Lock()
		defer mu.Unlock()
		out := map[string][]sdkReceived{}
		for k, v := range seen {
			out[k] = append([]sdkReceived(nil), v...)
		}
		seen = map[string][]sdkReceived{}
		return out
	}
}

// checkReceived compares what the receiver saw with the stored events: every attribute
// value exactly, and the data exactly (JSON data as JSON in structured mode, where sdk-go
// reads the value without the whitespace around it).
func checkReceived(t *testing.T, what string, stored map[string]map[string]any, seen map[string][]sdkReceived, data map[string]string, structured bool) {
	t.Helper()
	if len(seen) != len(stored) {
		t.Errorf("%s: the receiver saw %d events, want %d", what, len(seen), len(stored))
	}
	for id, ev := range stored {
		rs := seen[id]
		if len(rs) != 1 {
			t.Errorf("%s: %s received %d times", what, id, len(rs))
			continue
		}
		r := rs[0]
		for k, v := range ev {
			if k == "data" || k == "data_base64" {
				continue
			}
			if got, ok := r.attrs[k]; !ok || got != canonical(v) {
				t.Errorf("%s: %s: %s = %q, stored %q", what, id, k, got, canonical(v))
			}
		}
		for k := range r.attrs {
			if _, ok := ev[k]; !ok {
				t.Errorf("%s: %s: the receiver saw %s = %q, which is not stored", what, id, k, r.attrs[k])
			}
		}
		want := data[id]
		if structured && json.Valid([]byte(want)) {
			var a, b bytes.Buffer
			json.Compact(&a, []byte(want))
			json.Compact(&b, r.data)
			if a.String() != b.String() {
				t.Errorf("%s: %s: data %q, want %q", what, id, r.data, want)
			}
		} else if string(r.data) != want {
			t.Errorf("%s: %s: data %q, want %q", what, id, r.data, want)
		}
	}
}

// forward and emit --to deliver the events an sdk-go client stored to an sdk-go receiver,
// which sees every attribute value exactly as stored: in binary mode with
// --header-encoding raw, and in structured mode. With the default percent-encoding, the
// receiver sees binary-mode values still encoded, which is why the setting exists.
func TestForwardAndEmitToSDKReceiver(t *testing.T) {
	t.Parallel()
	node := startInteropNode(t)
	sendWithSDK(t, node, false, sdkInteropEvents(t, "bin"))
	sendWithSDK(t, node, true, sdkInteropEvents(t, "str"))
	stored, ce := replayCE(t, node)
	// The data each event carries, exactly: what sdk-go sent.
	data := map[string]string{
		"bin-json": interopData, "str-json": interopData,
		"bin-xml": "<note a=\"1\">hi</note>\n", "str-xml": "<note a=\"1\">hi</note>\n",
	}
	file := filepath.Join(t.TempDir(), "ce.jsonl")
	if err := os.WriteFile(file, []byte(ce), 0o600); err != nil {
		t.Fatal(err)
	}
	// replay -o ce prints JSON data compact: that is what emit --file sends.
	fromFile := map[string]string{"bin-json": `{"msg":"hello","n":[1,2]}`, "str-json": interopData,
		"bin-xml": data["bin-xml"], "str-xml": data["str-xml"]}

	recv, seen := startSDKReceiver(t)
	for _, tc := range []struct {
		name       string
		args       []string
		structured bool
		data       map[string]string
	}{
		{"forward binary raw", []string{"forward", "--node", node, "--to", recv, "--from", "start", "--until-caught-up", "--header-encoding", "raw"}, false, data},
		{"forward structured", []string{"forward", "--node", node, "--to", recv, "--from", "start", "--until-caught-up", "--mode", "structured"}, true, data},
		{"emit binary raw", []string{"emit", "--to", recv, "--file", file, "--mode", "binary", "--header-encoding", "raw"}, false, fromFile},
		{"emit structured", []string{"emit", "--to", recv, "--file", file, "--mode", "structured"}, true, fromFile},
	} {
		code, _, errOut := runCLI(t, tc.args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, errOut)
		}
		checkReceived(t, tc.name, stored, seen(), tc.data, tc.structured)
	}

	// The default, the binding's percent-encoding, reaches sdk-go still encoded.
	code, _, errOut := runCLI(t, "forward", "--node", node, "--to", recv, "--from", "start", "--until-caught-up")
	if code != 0 {
		t.Fatalf("forward: exit %d: %s", code, errOut)
	}
	if got := seen()["bin-json"]; len(got) != 1 || got[0].attrs["subject"] != "say%20%22hi%22%20now,%20100%25%20sure" {
		t.Errorf("percent-encoded subject as sdk-go sees it: %+v", got)
	}
}

func init() {
	scriptCmds["sdkreceiver"] = cmdSDKReceiver
	scriptCmds["sdkparse"] = cmdSDKParse
}

// cmdSDKParse reads each line of FILE with sdk-go v2's JSON format parser (json.Unmarshal into
// an event.Event, then Validate) and prints "ID DATACONTENTTYPE DATA" for it; a line it cannot
// read fails the script.
//
//	sdkparse FILE
func cmdSDKParse(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sdkparse FILE")
	}
	for i, line := range strings.Split(strings.TrimSpace(ts.ReadFile(args[0])), "\n") {
		var e event.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			ts.Fatalf("line %d: sdk-go cannot read %s: %v", i+1, line, err)
		}
		if err := e.Validate(); err != nil {
			ts.Fatalf("line %d: sdk-go finds %s invalid: %v", i+1, line, err)
		}
		fmt.Fprintf(ts.Stdout(), "%s %s %s\n", e.ID(), e.DataContentType(), e.Data())
	}
}

// cmdSDKReceiver starts an sdk-go v2 receiver (client.StartReceiver) on a free loopback port,
// sets NAME to its URL, and appends each event it receives to LOG as a JSON line: every
// attribute in its canonical string form as sdk-go reads it, and the data as a string.
//
//	sdkreceiver NAME -log LOG
func cmdSDKReceiver(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 || args[1] != "-log" {
		ts.Fatalf("usage: sdkreceiver NAME -log LOG")
	}
	logf, err := os.Create(ts.MkAbs(args[2]))
	ts.Check(err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	p, err := cehttp.New(cehttp.WithListener(ln))
	ts.Check(err)
	c, err := ceclient.New(p)
	ts.Check(err)
	var mu sync.Mutex
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.StartReceiver(ctx, func(e event.Event) protocol.Result {
			line := map[string]string{"id": e.ID(), "source": e.Source(), "type": e.Type(), "subject": e.Subject(), "data": string(e.Data())}
			for k, v := range e.Extensions() {
				line[k], _ = types.Format(v)
			}
			b, _ := json.Marshal(line)
			mu.Lock()
			logf.Write(append(b, '\n'))
			mu.Unlock()
			return protocol.ResultACK
		})
	}()
	ts.Setenv(args[0], "http://"+ln.Addr().String())
	ts.Defer(func() {
		cancel()
		<-done
		logf.Close()
	})
}
