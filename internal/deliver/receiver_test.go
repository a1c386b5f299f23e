package deliver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// tricky is an event whose attributes need percent-encoding in binary mode.
const tricky = `{"specversion":"1.0",` +
	`"id":"id with space \"quote\" 100% é",` +
	`"source":"/src/ünï/x",` +
	`"type":"org.example.tricky.v1",` +
	`"subject":"a \"b\" 5% é ☃ ~+",` +
	`"time":"2024-05-06T07:08:09.123Z",` +
	`"dataschema":"https://example.com/schema?v=1",` +
	`"datacontenttype":"application/json",` +
	`"comment":"hello \"world\" 100%",` +
	`"unicode":"Grüße ☃",` +
	`"minorversion":0,"pii":false,` +
	`"data":{"user":{"name":"Zoë"},"n":[1,2.5,null]}}`

// Raw ce- header values of tricky, encoded by hand.
var trickyWire = map[string]string{
	"Ce-Id":           "id%20with%20space%20%22quote%22%20100%25%20%C3%A9",
	"Ce-Source":       "/src/%C3%BCn%C3%AF/x",
	"Ce-Subject":      "a%20%22b%22%205%25%20%C3%A9%20%E2%98%83%20~+",
	"Ce-Comment":      "hello%20%22world%22%20100%25",
	"Ce-Unicode":      "Gr%C3%BC%C3%9Fe%20%E2%98%83",
	"Ce-Minorversion": "0",
	"Ce-Pii":          "false",
	"Ce-Specversion":  "1.0",
	"Ce-Type":         "org.example.tricky.v1",
	"Ce-Time":         "2024-05-06T07:08:09.123Z",
	"Ce-Dataschema":   "https://example.com/schema?v=1",
	"Content-Type":    "application/json",
}

// received is one request as a receiver saw it.
type received struct {
	header http.Header
	body   []byte
}

func recorder(t *testing.T, status int) (*httptest.Server, func() []received) {
	t.Helper()
	var mu sync.Mutex
	var got []received
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, received{r.Header.Clone(), body})
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(ts.Close)
	return ts, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), got...)
	}
}

func (r received) request() *http.Request {
	req := httptest.NewRequest("POST", "/", bytes.NewReader(r.body))
	req.Header = r.header.Clone()
	return req
}

func unescape(t *testing.T, s string) string {
	t.Helper()
	u, err := url.PathUnescape(s)
	if err != nil {
		t.Fatalf("unescaping %q: %v", s, err)
	}
	return u
}

// asStored is what a binary-mode receiver should rebuild from ev: every
// extension value a string (headers carry no JSON types).
func asStored(t *testing.T, ev string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(ev), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range m {
		switch v.(type) {
		case float64, bool:
			m[k] = fmt.Sprint(v)
		}
	}
	return m
}

func TestBinaryReceivedBySDK(t *testing.T) {
	ts, got := recorder(t, 202)
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Binary})
	if _, err := s.Send(context.Background(), [][]byte{[]byte(tricky)}); err != nil {
		t.Fatal(err)
	}
	r := got()[0]
	for k, want := range trickyWire {
		if v := r.header.Values(k); len(v) != 1 || v[0] != want {
			t.Errorf("raw header %s = %q, want %q", k, v, want)
		}
	}
	for k, vs := range r.header {
		for _, v := range vs {
			for i := 0; i < len(v); i++ {
				if c := v[i]; strings.HasPrefix(k, "Ce-") && (c < 0x21 || c > 0x7e || c == '"') {
					t.Errorf("header %s has byte %#x on the wire", k, c)
				}
			}
		}
	}

	// sdk-go v2.16 parses the message but does not percent-decode header
	// values; a conforming receiver decodes them, as below.
	e, err := cehttp.NewEventFromHTTPRequest(r.request())
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	checks := []struct{ name, got, want string }{
		{"id", unescape(t, e.ID()), `id with space "quote" 100% é`},
		{"source", unescape(t, e.Source()), "/src/ünï/x"},
		{"type", e.Type(), "org.example.tricky.v1"},
		{"subject", unescape(t, e.Subject()), `a "b" 5% é ☃ ~+`},
		{"time", e.Time().UTC().Format(time.RFC3339Nano), "2024-05-06T07:08:09.123Z"},
		{"dataschema", e.DataSchema(), "https://example.com/schema?v=1"},
		{"datacontenttype", e.DataContentType(), "application/json"},
		{"specversion", e.SpecVersion(), "1.0"},
		{"data", string(e.Data()), `{"user":{"name":"Zoë"},"n":[1,2.5,null]}`},
	}
	for ext, want := range map[string]string{"comment": `hello "world" 100%`, "unicode": "Grüße ☃", "minorversion": "0", "pii": "false"} {
		v, _ := e.Extensions()[ext].(string)
		checks = append(checks, struct{ name, got, want string }{ext, unescape(t, v), want})
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if n := len(e.Extensions()); n != 4 {
		t.Errorf("%d extensions, want 4: %v", n, e.Extensions())
	}

	// The node's decoder rebuilds the event exactly.
	back, err := cevent.DecodeBinary(r.header, r.body, cevent.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(back.JSON, &m); err != nil {
		t.Fatal(err)
	}
	if want := asStored(t, tricky); !reflect.DeepEqual(m, want) {
		t.Errorf("rebuilt\n%s\nwant\n%v", back.JSON, want)
	}
}

func TestBinaryData(t *testing.T) {
	cases := []struct {
		name, event, ct string
		body            string
	}{
		{"text", `{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"text/plain; charset=utf-8","data":"line 1\nZoë \"quoted\""}`,
			"text/plain; charset=utf-8", "line 1\nZoë \"quoted\""},
		{"base64", `{"specversion":"1.0","id":"2","source":"/s","type":"t","datacontenttype":"application/octet-stream","data_base64":"AAEC/w=="}`,
			"application/octet-stream", "\x00\x01\x02\xff"},
		{"json string", `{"specversion":"1.0","id":"3","source":"/s","type":"t","datacontenttype":"application/vnd.x+json","data":"just a string"}`,
			"application/vnd.x+json", `"just a string"`},
		{"no content type", `{"specversion":"1.0","id":"4","source":"/s","type":"t","data":{"a":1}}`, "", `{"a":1}`},
		{"no data", `{"specversion":"1.0","id":"5","source":"/s","type":"t"}`, "", ""},
		{"JSON with whitespace", "{\"specversion\":\"1.0\",\"id\":\"7\",\"source\":\"/s\",\"type\":\"t\",\"datacontenttype\":\"application/json\",\"data\":{\"a\": [1,\r\n 2]}\n}",
			"application/json", "{\"a\": [1,\r\n 2]}\n"},
		{"JSON data not last", "{\"specversion\":\"1.0\",\"id\":\"8\",\"source\":\"/s\",\"data\": [1, 2]\t,\"type\":\"t\"}",
			"", " [1, 2]\t"},
		{"xml", `{"specversion":"1.0","id":"9","source":"/s","type":"t","datacontenttype":"application/xml","data":"<a b=\"c\"/>\n"}`,
			"application/xml", "<a b=\"c\"/>\n"},
		{"null data", `{"specversion":"1.0","id":"6","source":"/s","type":"t","subject":null,"data":null}`, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ts, got := recorder(t, 200)
			s, _ := newSender(t, Options{URL: ts.URL, Mode: Binary})
			if _, err := s.Send(context.Background(), [][]byte{[]byte(c.event)}); err != nil {
				t.Fatal(err)
			}
			r := got()[0]
			if string(r.body) != c.body || r.header.Get("Content-Type") != c.ct {
				t.Errorf("body %q Content-Type %q; want %q %q", r.body, r.header.Get("Content-Type"), c.body, c.ct)
			}
			if _, ok := r.header["Ce-Datacontenttype"]; ok {
				t.Error("datacontenttype sent as a ce- header")
			}
			if _, ok := r.header["Ce-Subject"]; ok {
				t.Error("a null attribute was sent")
			}
			back, err := cevent.DecodeBinary(r.header, r.body, cevent.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			json.Unmarshal(back.JSON, &m)
			want := asStored(t, c.event)
			for k, v := range want {
				if v == nil {
					delete(want, k)
				}
			}
			if !reflect.DeepEqual(m, want) {
				t.Errorf("rebuilt %s, want %v", back.JSON, want)
			}
		})
	}
}

func TestBinaryRefusesWhatHeadersCannotCarry(t *testing.T) {
	ts, got := recorder(t, 200)
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Binary})
	for _, ev := range []string{
		`[1]`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","Bad-Name":"x"}`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","ext":{"a":1}}`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":1,"data_base64":"AA=="}`,
		`{"specversion":"1.0","id":"1","source":"/s","type":"t","data_base64":"!!"}`,
	} {
		if _, err := s.Send(context.Background(), [][]byte{[]byte(ev)}); err == nil {
			t.Errorf("sent %s", ev)
		}
	}
	if n := len(got()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

func TestStructuredAndBatchReceivedBySDK(t *testing.T) {
	evs := [][]byte{[]byte(tricky), event("e2"), []byte(`{"specversion":"1.0","id":"3","source":"/s","type":"t","data_base64":"AAEC"}`)}
	ts, got := recorder(t, 200)
	s, _ := newSender(t, Options{URL: ts.URL, Mode: Structured})
	if _, err := s.Send(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	b, _ := newSender(t, Options{URL: ts.URL, Mode: Batch})
	if _, err := b.Send(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	reqs := got()
	for i, ev := range evs {
		e, err := cehttp.NewEventFromHTTPRequest(reqs[i].request())
		if err != nil {
			t.Fatal(err)
		}
		var want struct{ ID string }
		json.Unmarshal(ev, &want)
		if e.ID() != want.ID {
			t.Errorf("structured %d: id %q, want %q", i, e.ID(), want.ID)
		}
	}
	if e, _ := cehttp.NewEventFromHTTPRequest(reqs[0].request()); e.Subject() != `a "b" 5% é ☃ ~+` || e.Extensions()["unicode"] != "Grüße ☃" {
		t.Errorf("structured event %v", e)
	}
	batch, err := cehttp.NewEventsFromHTTPRequest(reqs[3].request())
	if err != nil {
		t.Fatal(err)
	}
	if len(batch) != 3 || batch[0].Subject() != `a "b" 5% é ☃ ~+` || batch[1].ID() != "e2" || !bytes.Equal(batch[2].Data(), []byte{0, 1, 2}) {
		t.Errorf("batch %v", batch)
	}
	decoded, err := cevent.DecodeBatch(reqs[3].body, cevent.Limits{})
	if err != nil || len(decoded) != 3 {
		t.Fatalf("node decoder: %v", err)
	}
}

// startNode runs a real evtctl node over an in-memory log.
func startNode(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.New(server.Config{Store: st}))
	t.Cleanup(func() {
		ts.Close()
		st.Close()
	})
	return ts
}

// nodeEvents reads every stored event back through the JSON-RPC API, oldest first.
func nodeEvents(t *testing.T, node string) map[string]json.RawMessage {
	t.Helper()
	req := `{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":100,"order":"asc","waitTime":"1ms"}}`
	resp, err := http.Post(node+"/", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result struct {
			Items []struct {
				Cursor string          `json:"cursor"`
				Data   json.RawMessage `json:"data"`
			} `json:"items"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	m := map[string]json.RawMessage{}
	for _, it := range out.Result.Items {
		m[it.Cursor] = it.Data
	}
	return m
}

func TestAgainstNode(t *testing.T) {
	node := startNode(t)
	stored := map[string]string{} // cursor -> event sent
	for _, mode := range []Mode{Binary, Structured, Batch} {
		t.Run(mode.String(), func(t *testing.T) {
			evs := [][]byte{event(mode.String() + "-1"), event(mode.String() + "-2"), event(mode.String() + "-3")}
			if mode == Binary {
				evs = append(evs, []byte(tricky))
			}
			s, _ := newSender(t, Options{URL: node.URL + "/events", Mode: mode})
			res, err := s.Send(context.Background(), evs)
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(evs) {
				t.Fatalf("%d results for %d events", len(res), len(evs))
			}
			for i, r := range res {
				if r.Cursor == "" || r.Duplicate || r.Status != 200 {
					t.Errorf("result %d: %+v", i, r)
				}
				if i > 0 && r.Cursor <= res[i-1].Cursor {
					t.Errorf("cursors out of order: %q then %q", res[i-1].Cursor, r.Cursor)
				}
				stored[r.Cursor] = string(evs[i])
			}
			again, err := s.Send(context.Background(), evs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range again {
				if !r.Duplicate || r.Cursor != res[i].Cursor {
					t.Errorf("resend %d: %+v, want a duplicate of %q", i, r, res[i].Cursor)
				}
			}
		})
	}
	// What the node stored is what was sent (binary-mode extensions as strings).
	back := nodeEvents(t, node.URL)
	if len(back) != len(stored) {
		t.Fatalf("node holds %d events, want %d", len(back), len(stored))
	}
	for c, sent := range stored {
		var m map[string]any
		if err := json.Unmarshal(back[c], &m); err != nil {
			t.Fatalf("cursor %s: %v", c, err)
		}
		if want := asStored(t, sent); !reflect.DeepEqual(m, want) {
			t.Errorf("cursor %s: node stored %s, want %s", c, back[c], sent)
		}
	}
}

func TestNodeRefusalReasons(t *testing.T) {
	node := startNode(t)
	s, log := newSender(t, Options{URL: node.URL + "/events", Mode: Batch})
	bad := [][]byte{event("ok"), []byte(`{"specversion":"1.0","id":"x","source":"/s","type":"t","time":"yesterday"}`)}
	_, err := s.Send(context.Background(), bad)
	var se *StatusError
	if !errors.As(err, &se) || se.Status != 400 || !strings.Contains(se.Reason, "time") || !strings.Contains(se.Reason, "index 1") {
		t.Fatalf("err = %v", err)
	}
	if len(log.get()) != 0 {
		t.Error("a 400 was retried")
	}
	tok, _ := newSender(t, Options{URL: node.URL + "/nope", Mode: Structured})
	if _, err := tok.Send(context.Background(), [][]byte{event("y")}); !errors.As(err, &se) || se.Status != 404 {
		t.Errorf("unknown path: %v", err)
	}
}

// apiEvent has JSON data of a +json type sdk-go v2 does not read as JSON.
const apiEvent = `{"specversion":"1.0","id":"api","source":"/s","type":"t","datacontenttype":"application/vnd.api+json","data":{"data":{"type":"articles","id":"1"}}}`

// Structured and batch mode write JSON data that sdk-go reads only as a string as
// data_base64, which sdk-go and the node's decoder both read as the data's bytes; to an evtctl
// node, events go as they are.
func TestStructuredJSONTypesReadBySDK(t *testing.T) {
	const data = `{"data":{"type":"articles","id":"1"}}`
	evs := [][]byte{[]byte(apiEvent), event("plain")}
	ts, got := recorder(t, 200)
	for _, opts := range []Options{{Mode: Structured}, {Mode: Batch}, {Mode: Structured, Node: true}, {Mode: Batch, Node: true}} {
		opts.URL = ts.URL
		s, _ := newSender(t, opts)
		if _, err := s.Send(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
	reqs := got()
	if len(reqs) != 6 {
		t.Fatalf("%d requests", len(reqs))
	}
	// To any receiver: the first request (structured) and the batch (the third).
	e, err := cehttp.NewEventFromHTTPRequest(reqs[0].request())
	if err != nil {
		t.Fatalf("sdk-go cannot read %s: %v", reqs[0].body, err)
	}
	if string(e.Data()) != data || e.DataContentType() != "application/vnd.api+json" {
		t.Errorf("sdk-go reads %s as %q %q", reqs[0].body, e.DataContentType(), e.Data())
	}
	batch, err := cehttp.NewEventsFromHTTPRequest(reqs[2].request())
	if err != nil {
		t.Fatalf("sdk-go cannot read batch %s: %v", reqs[2].body, err)
	}
	if len(batch) != 2 || string(batch[0].Data()) != data || batch[1].ID() != "plain" {
		t.Errorf("sdk-go reads batch %s as %v", reqs[2].body, batch)
	}
	for _, i := range []int{0, 2} {
		evs, err := cevent.DecodeRequest(reqs[i].header, reqs[i].body, cevent.Limits{})
		if err != nil {
			t.Fatalf("the node's decoder refuses %s: %v", reqs[i].body, err)
		}
		if want := `"data_base64":"eyJkYXRhIjp7InR5cGUiOiJhcnRpY2xlcyIsImlkIjoiMSJ9fQ=="`; !bytes.Contains(evs[0].JSON, []byte(want)) {
			t.Errorf("the node's decoder reads %s as %s", reqs[i].body, evs[0].JSON)
		}
	}
	// To a node: as stored.
	if string(reqs[3].body) != apiEvent {
		t.Errorf("structured to a node: %s", reqs[3].body)
	}
	if !bytes.HasPrefix(reqs[5].body, []byte("["+apiEvent+",")) {
		t.Errorf("batch to a node: %s", reqs[5].body)
	}
}

// An event whose datacontenttype is a CloudEvents format goes structured when binary mode is
// asked: as a Content-Type it would make every receiver read the data as a CloudEvent (or a
// batch). sdk-go and the node's decoder read the event with its data.
func TestBinaryOfFormatTypeGoesStructured(t *testing.T) {
	const inner = `{"specversion":"1.0","id":"inner","source":"/in","type":"t.in"}`
	for _, ct := range []string{"application/cloudevents+json", "Application/CloudEvents+JSON; charset=utf-8", "application/cloudevents-batch+json", "application/cloudevents+xml"} {
		data := inner
		if strings.HasSuffix(ct, "xml") {
			data = `"<e/>"`
		}
		ev := fmt.Sprintf(`{"specversion":"1.0","id":"outer","source":"/s","type":"t","subject":"Grüße","datacontenttype":%q,"data":%s}`, ct, data)
		for _, enc := range []HeaderEncoding{HeaderPercent, HeaderRaw} {
			h, body, err := Encode(Binary, enc, []byte(ev))
			if err != nil {
				t.Fatalf("%s, %s: %v", ct, enc, err)
			}
			if h.Get("Content-Type") != ContentTypeStructured || h.Get("Ce-Id") != "" {
				t.Errorf("%s, %s: headers %v", ct, enc, h)
			}
			e, err := cehttp.NewEventFromHTTPRequest(received{h, body}.request())
			if err != nil {
				t.Fatalf("%s: sdk-go cannot read %s: %v", ct, body, err)
			}
			want := data
			if strings.HasSuffix(ct, "xml") {
				want = "<e/>"
			}
			if e.ID() != "outer" || e.Subject() != "Grüße" || string(e.Data()) != want {
				t.Errorf("%s: sdk-go reads %s as %s %q %q", ct, body, e.ID(), e.Subject(), e.Data())
			}
			got, err := cevent.DecodeRequest(h, body, cevent.Limits{})
			if err != nil || len(got) != 1 || got[0].ID != "outer" {
				t.Fatalf("%s: the node's decoder reads %s as %v (%v)", ct, body, got, err)
			}
		}
	}
}
