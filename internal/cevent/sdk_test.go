package cevent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/cloudevents/sdk-go/v2/types"
)

// sdkCheck unmarshals ev.JSON, in the form ForSDK gives it for sdk-go, with sdk-go,
// validates it, and compares the attributes with the Event fields.
func sdkCheck(t *testing.T, ev Event) *event.Event {
	t.Helper()
	js, _ := ForSDK(ev.JSON)
	var e event.Event
	if err := json.Unmarshal(js, &e); err != nil {
		t.Fatalf("sdk-go cannot unmarshal %s: %v", js, err)
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("sdk-go Validate on %s: %v", js, err)
	}
	// sdk-go holds source as a url.URL and re-serializes it (dropping an
	// empty fragment, percent-encoding non-ASCII), so compare that form.
	u, err := url.Parse(ev.Source)
	if err != nil {
		t.Fatalf("source %q: %v", ev.Source, err)
	}
	if e.SpecVersion() != "1.0" || e.ID() != ev.ID || e.Source() != u.String() || e.Type() != ev.Type {
		t.Errorf("sdk-go reads %q %q %q %q; Event has %q %q %q", e.SpecVersion(), e.ID(), e.Source(), e.Type(), ev.ID, ev.Source, ev.Type)
	}
	if !e.Time().Equal(ev.Time) {
		t.Errorf("sdk-go time %v, Event time %v", e.Time(), ev.Time)
	}
	return &e
}

// TestSDKReadsOurEvents checks every event the table tests accept.
func TestSDKReadsOurEvents(t *testing.T) {
	for _, tc := range structuredValid {
		ev, err := DecodeStructured([]byte(tc.in), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Run("structured/"+tc.name, func(t *testing.T) { sdkCheck(t, ev) })
	}
	for _, tc := range binaryValid {
		ev, err := DecodeBinary(tc.h, []byte(tc.body), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Run("binary/"+tc.name, func(t *testing.T) { sdkCheck(t, ev) })
	}
	ev, err := DecodeStructured([]byte(sized(65536)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sdkCheck(t, ev)
	r := httptest.NewRequest("GET", "/signal/e?_domain=d&_name=n&_timestamp=Sun,+06+Nov+1994+08:49:37+GMT&a=1&a=2", nil)
	ev, err = FromSignal("e", r, nil, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := sdkCheck(t, ev)
	if e.Subject() != "e" || string(e.Data()) != `{"a":["1","2"]}` || e.DataContentType() != "application/json" {
		t.Errorf("signal read by sdk-go: %v", e)
	}
}

// plainHeaders reports whether sdk-go's binary decoding can be compared
// with ours: canonical header names, and no values that we read other than
// as received (sdk-go neither percent-decodes nor unquotes). Quotes inside a
// value and a '%' that starts no escape are kept by both.
func plainHeaders(h http.Header) bool {
	for k, vs := range h {
		if k != http.CanonicalHeaderKey(k) {
			return false
		}
		for _, v := range vs {
			if decodeHeaderValue(v) != v {
				return false
			}
		}
	}
	return true
}

// TestBinaryMatchesSDK decodes the same binary-mode requests with sdk-go's
// HTTP binding and with DecodeBinary, and compares attributes and data.
func TestBinaryMatchesSDK(t *testing.T) {
	n := 0
	for _, tc := range binaryValid {
		if !plainHeaders(tc.h) {
			continue
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			ours, err := DecodeBinary(tc.h, []byte(tc.body), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			req := httptest.NewRequest("POST", "/events", strings.NewReader(tc.body))
			req.Header = tc.h.Clone()
			theirs, err := cehttp.NewEventFromHTTPRequest(req)
			if err != nil {
				t.Fatalf("sdk-go: %v", err)
			}
			if got := sdkCheck(t, ours); got != nil {
				compareSDKEvents(t, got, theirs)
			}
		})
	}
	if n < 15 {
		t.Fatalf("only %d binary cases compared", n)
	}
}

func compareSDKEvents(t *testing.T, got, want *event.Event) {
	t.Helper()
	type attrs struct {
		ID, Source, Type, Subject, DataContentType, DataSchema string
		Time                                                   time.Time
	}
	a := func(e *event.Event) attrs {
		return attrs{e.ID(), e.Source(), e.Type(), e.Subject(), e.DataContentType(), e.DataSchema(), e.Time().UTC()}
	}
	if a(got) != a(want) {
		t.Errorf("attributes\n got %+v\nwant %+v", a(got), a(want))
	}
	// Binary mode carries extensions as strings; compare canonical string forms.
	canon := func(x any) string {
		s, err := types.Format(x)
		if err != nil {
			t.Fatalf("extension value %#v: %v", x, err)
		}
		return s
	}
	if !maps.EqualFunc(got.Extensions(), want.Extensions(), func(x, y any) bool { return canon(x) == canon(y) }) {
		t.Errorf("extensions\n got %#v\nwant %#v", got.Extensions(), want.Extensions())
	}
	gd, wd := got.Data(), want.Data()
	if IsJSONMediaType(cmpOr(want.DataContentType(), "application/json")) && json.Valid(wd) {
		gd, wd = compactJSON(t, gd), compactJSON(t, wd)
	}
	if !bytes.Equal(gd, wd) {
		t.Errorf("data\n got %q\nwant %q", gd, wd)
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func compactJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	if len(b) == 0 {
		return b
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatalf("compact %q: %v", b, err)
	}
	return buf.Bytes()
}

// sdkEvents returns events built with sdk-go, as a producer would.
func sdkEvents(t *testing.T) []event.Event {
	t.Helper()
	var evs []event.Event
	e := event.New()
	e.SetID("b3b3981e-7544-11ea-b663-acde48001122")
	e.SetSource("https://discovery.edx.org/events/")
	e.SetType("org.openedx.catalog.course.created.v1")
	e.SetTime(time.Date(2020, 2, 23, 9, 43, 18, 0, time.UTC))
	e.SetExtension("minorversion", 0)
	e.SetExtension("pii", false)
	e.SetExtension("sourcehost", "discovery-1")
	if err := e.SetData("application/json", map[string]any{"course_key": "course-v1:edX+DemoX+Demo", "n": 1}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, e)

	e = event.New()
	e.SetID("2")
	e.SetSource("/sensors/tn-1234567/alerts")
	e.SetType("com.example.text")
	e.SetSubject("mynewfile.jpg")
	e.SetDataSchema("https://example.com/schema")
	if err := e.SetData("text/plain", "hello\nworld"); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, e)

	e = event.New()
	e.SetID("3")
	e.SetSource("urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66")
	e.SetType("com.example.binary")
	if err := e.SetData("application/octet-stream", []byte{0, 1, 2, 0xff}); err != nil {
		t.Fatal(err)
	}
	evs = append(evs, e)

	e = event.New()
	e.SetID("4")
	e.SetSource("/no/data")
	e.SetType("com.example.nodata")
	evs = append(evs, e)
	return evs
}

// TestSDKProducedRequests decodes what sdk-go sends in binary, structured
// and batch mode, and compares the result with the original events.
func TestSDKProducedRequests(t *testing.T) {
	ctx := context.Background()
	evs := sdkEvents(t)
	decode := func(t *testing.T, req *http.Request) []Event {
		t.Helper()
		var body []byte
		if req.Body != nil {
			var err error
			if body, err = io.ReadAll(req.Body); err != nil {
				t.Fatal(err)
			}
		}
		out, err := DecodeRequest(req.Header, body, Limits{})
		if err != nil {
			t.Fatalf("DecodeRequest(%v, %s): %v", req.Header, body, err)
		}
		return out
	}
	for _, mode := range []struct {
		name string
		ctx  context.Context
	}{{"binary", binding.WithForceBinary(ctx)}, {"structured", binding.WithForceStructured(ctx)}} {
		for i := range evs {
			t.Run(mode.name+"/"+evs[i].ID(), func(t *testing.T) {
				req := httptest.NewRequest("POST", "/events", nil)
				if err := cehttp.WriteRequest(mode.ctx, binding.ToMessage(&evs[i]), req); err != nil {
					t.Fatal(err)
				}
				got := decode(t, req)
				if len(got) != 1 {
					t.Fatalf("got %d events", len(got))
				}
				compareSDKEvents(t, sdkCheck(t, got[0]), &evs[i])
			})
		}
	}
	t.Run("batch", func(t *testing.T) {
		req, err := cehttp.NewHTTPRequestFromEvents(ctx, "http://node/events", evs)
		if err != nil {
			t.Fatal(err)
		}
		got := decode(t, req)
		if len(got) != len(evs) {
			t.Fatalf("got %d events, want %d", len(got), len(evs))
		}
		for i := range got {
			compareSDKEvents(t, sdkCheck(t, got[i]), &evs[i])
		}
	})
}
