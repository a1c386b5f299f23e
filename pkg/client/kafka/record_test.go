package kafka

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/pkg/client"
)

func hdrs(kv ...string) []kgo.RecordHeader {
	var hs []kgo.RecordHeader
	for i := 0; i+1 < len(kv); i += 2 {
		hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return hs
}

// buildAll makes the item of r with no filter.
func buildAll(t *testing.T, r *kgo.Record) client.Item {
	t.Helper()
	m, err := compileQuery("")
	if err != nil {
		t.Fatal(err)
	}
	b, ok := newDecoder("orders").build(r, m)
	if !ok {
		t.Fatal("the empty query rejected a record")
	}
	return itemOf(b, "")
}

var avroValue = append([]byte{0, 0, 0, 0, 42}, []byte("\x02\x0clearner\x00\xff\xfe")...)

func TestRecordAsCloudEvent(t *testing.T) {
	ts := time.Date(2026, 3, 4, 5, 6, 7, 890_000_000, time.UTC)
	for _, c := range []struct {
		name string
		rec  *kgo.Record
		want string // the item's data
		typ  string
	}{{
		name: "the Open edX producer: Avro behind a schema registry's prefix, bare sourcehost",
		rec: &kgo.Record{Value: avroValue, Headers: hdrs(
			"ce_type", "org.openedx.learning.auth.session.login.completed.v1", "ce_id", "b1e3a0c2-1f0e-11ef-9c2f-0242ac120002",
			"ce_source", "openedx/lms/web", "ce_specversion", "1.0", "sourcehost", "lms-7f9c.example.com",
			"content-type", "application/avro", "ce_datacontenttype", "application/avro")},
		want: `{"specversion":"1.0","id":"b1e3a0c2-1f0e-11ef-9c2f-0242ac120002","source":"openedx/lms/web","type":"org.openedx.learning.auth.session.login.completed.v1","datacontenttype":"application/avro","sourcehost":"lms-7f9c.example.com","data_base64":"` + base64.StdEncoding.EncodeToString(avroValue) + `"}`,
		typ:  "org.openedx.learning.auth.session.login.completed.v1",
	}, {
		name: "ce_datacontenttype when there is no content-type; bare minorversion; values as they are",
		rec: &kgo.Record{Value: []byte(`{"a": [1, 2]}`), Headers: hdrs(
			"ce_specversion", "1.0", "ce_id", "x%41", "ce_source", "/s", "ce_type", "t", "ce_subject", `"quoted" 50%25`,
			"ce_time", "2026-01-02T03:04:05Z", "minorversion", "2", "ce_datacontenttype", "application/json")},
		want: `{"specversion":"1.0","id":"x%41","source":"/s","type":"t","subject":"\"quoted\" 50%25","time":"2026-01-02T03:04:05Z","datacontenttype":"application/json","minorversion":"2","data":{"a": [1, 2]}}`,
		typ:  "t",
	}, {
		name: "content-type is preferred; a ce_ extension beats the bare header",
		rec: &kgo.Record{Value: []byte("héllo"), Headers: hdrs(
			"ce_specversion", "1.0", "ce_id", "1", "ce_source", "/s", "ce_type", "t",
			"content-type", "text/plain", "ce_datacontenttype", "application/json", "sourcehost", "bare", "ce_sourcehost", "prefixed")},
		want: `{"specversion":"1.0","id":"1","source":"/s","type":"t","datacontenttype":"text/plain","sourcehost":"prefixed","data":"héllo"}`,
		typ:  "t",
	}, {
		name: "structured mode",
		rec: &kgo.Record{Value: []byte(` {"specversion" : "1.0", "id":"9", "source":"/s", "type":"o\"q", "data":{"k":1}}`),
			Headers: hdrs("content-type", "application/cloudevents+json; charset=utf-8")},
		want: `{"specversion":"1.0","id":"9","source":"/s","type":"o\"q","data":{"k":1}}`,
		typ:  `o"q`,
	}, {
		name: "a CloudEvent in the JSON format without headers",
		rec:  &kgo.Record{Value: []byte(`{"specversion":"1.0","id":"9","source":"/s","type":"t"}`)},
		want: `{"specversion":"1.0","id":"9","source":"/s","type":"t"}`,
		typ:  "t",
	}, {
		name: "a tombstone in binary mode: no data",
		rec:  &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "/s", "ce_type", "t")},
		want: `{"specversion":"1.0","id":"1","source":"/s","type":"t"}`,
		typ:  "t",
	}, {
		name: "no CloudEvent: made from the record",
		rec: &kgo.Record{Partition: 2, Offset: 1234, Timestamp: ts, Key: []byte("user-7"), Value: []byte(`{"total": 12}`),
			Headers: hdrs("trace", "abc", "bin", "\xff\x00")},
		want: `{"specversion":"1.0","id":"2/1234","source":"kafka:orders","type":"orders","time":"2026-03-04T05:06:07.89Z","datacontenttype":"application/json","kafkaheaders":"[[\"trace\",\"abc\"],[\"bin\",{\"base64\":\"/wA=\"}]]","kafkakey":"user-7","kafkaoffset":"1234","kafkapartition":"2","kafkatopic":"orders","notcloudevent":"no ce_ headers, and no content-type application/cloudevents+json","data":{"total": 12}}`,
		typ:  "orders",
	}, {
		name: "no CloudEvent, bytes and a binary key",
		rec:  &kgo.Record{Offset: 5, Timestamp: ts, Key: []byte{0, 1}, Value: avroValue},
		want: `{"specversion":"1.0","id":"0/5","source":"kafka:orders","type":"orders","time":"2026-03-04T05:06:07.89Z","datacontenttype":"application/octet-stream","kafkakeybase64":"AAE=","kafkaoffset":"5","kafkapartition":"0","kafkatopic":"orders","notcloudevent":"no ce_ headers, and no content-type application/cloudevents+json","data_base64":"` + base64.StdEncoding.EncodeToString(avroValue) + `"}`,
		typ:  "orders",
	}} {
		t.Run(c.name, func(t *testing.T) {
			it := buildAll(t, c.rec)
			if string(it.Data) != c.want {
				t.Errorf("data\n got %s\nwant %s", it.Data, c.want)
			}
			if it.Event != c.typ {
				t.Errorf("event %q, want %q", it.Event, c.typ)
			}
			if want := `{"cursor":"` + it.Cursor + `","event":` + string(mustJSON(c.typ)) + `,"data":` + c.want + `}`; string(it.Raw) != want {
				t.Errorf("raw\n got %s\nwant %s", it.Raw, want)
			}
			if !json.Valid(it.Raw) {
				t.Errorf("raw is not JSON: %s", it.Raw)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestBrokenCloudEventsAreShown: a record that claims a mode but is no valid event is made
// into one, saying why, never dropped.
func TestBrokenCloudEventsAreShown(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  *kgo.Record
		why  string
	}{
		{"JSON content-type, not JSON", &kgo.Record{Value: []byte("{oops"), Headers: hdrs(
			"ce_specversion", "1.0", "ce_id", "1", "ce_source", "/s", "ce_type", "t", "content-type", "application/json")},
			`content-type "application/json" declares JSON, but the body is not valid JSON`},
		{"no id", &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_source", "/s", "ce_type", "t")},
			`missing required attribute "id" (header ce_id)`},
		{"twice", &kgo.Record{Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_id", "2", "ce_source", "/s", "ce_type", "t")},
			`headers ce_id and ce_id both set attribute "id"`},
		{"structured, invalid", &kgo.Record{Value: []byte(`{"specversion":"0.3"}`), Headers: hdrs("content-type", "application/cloudevents+json")},
			`structured mode: unsupported specversion "0.3"`},
		{"structured in another format", &kgo.Record{Value: []byte{1}, Headers: hdrs("content-type", "application/cloudevents+avro")},
			`content-type "application/cloudevents+avro" is not supported`},
		{"a content-type that is no media type", &kgo.Record{Value: []byte("x"), Headers: hdrs("content-type", "nonsense")},
			`no ce_ headers`},
	} {
		t.Run(c.name, func(t *testing.T) {
			it := buildAll(t, c.rec)
			var ev map[string]any
			if err := json.Unmarshal(it.Data, &ev); err != nil {
				t.Fatal(err)
			}
			why, _ := ev[ExtNotCloudEvent].(string)
			if !strings.Contains(why, c.why) || it.Event != "orders" {
				t.Errorf("event %q, notcloudevent %q, want it to say %q\n%s", it.Event, why, c.why, it.Data)
			}
			if len(c.rec.Value) > 0 && ev["data"] == nil && ev["data_base64"] == nil {
				t.Errorf("the value is not shown: %s", it.Data)
			}
		})
	}
}

// TestHeaderMatchAgreesWithEventMatch: matching on headers before decoding gives the
// answer matching the decoded event gives, for records that decode and for those made
// into events.
func TestHeaderMatchAgreesWithEventMatch(t *testing.T) {
	recs := []*kgo.Record{
		{Value: []byte(`{"n":1}`), Headers: hdrs("ce_specversion", "1.0", "ce_id", "1", "ce_source", "/s", "ce_type", "orders", "content-type", "application/json")},
		{Value: []byte(`{"n":2}`), Headers: hdrs("ce_specversion", "1.0", "ce_id", "2", "ce_source", "/s", "ce_type", "a.b.c", "sourcehost", "h")},
		{Value: []byte(`{oops`), Headers: hdrs("ce_specversion", "1.0", "ce_id", "3", "ce_source", "/s", "ce_type", "a.b.c", "content-type", "application/json")},
		{Value: []byte(`{"n":4}`), Headers: hdrs("ce_specversion", "1.0", "ce_source", "/s", "ce_type", "a.b.c")},
		{Value: []byte(`{"n":5}`)},
		{Value: []byte(`{"n":6}`), Headers: hdrs("ce_specversion", "1.0", "ce_id", "0/6", "ce_source", "kafka:orders", "ce_type", "x")},
	}
	for i, r := range recs {
		r.Offset = int64(i + 1)
		r.Timestamp = time.Unix(1700000000, 0)
	}
	for _, q := range []string{
		"type = 'orders'", "type = 'a.b.c'", "NOT type = 'a.b.c'", "type MATCHES 'a.*.c' OR sourcehost EXISTS",
		"id = '3'", "source = 'kafka:orders'", "kafkaoffset = '3'", "data.n = 2", "notcloudevent EXISTS",
		"datacontenttype EXISTS", "time > TIME 2020-01-01T00:00:00Z", "NOT id EXISTS",
	} {
		m, err := compileQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			want := m.q.MatchJSON(buildAll(t, r).Data)
			_, got := newDecoder("orders").build(r, m)
			if got != want {
				t.Errorf("query %q, record %d: build says %v, the event %v", q, i, got, want)
			}
		}
	}
}
