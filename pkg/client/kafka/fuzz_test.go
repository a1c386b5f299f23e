package kafka

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"kafka://b1/orders", "kafka://b1:9093,[::1]/t?security.protocol=SASL_SSL&sasl.mechanism=PLAIN&sasl.username=u&sasl.password=pw",
		"kafka://u:pw@b/t", "kafka://b/t?sasl.password=%zz", "kafka://[::1/t", "kafka://b/t?enable.ssl.certificate.verification=0",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := ParseURL(s)
		if err != nil {
			return
		}
		again, err := ParseURL(cfg.Node())
		if err != nil || !slices.Equal(again.Brokers, cfg.Brokers) || again.Topic != cfg.Topic {
			t.Fatalf("%q: node %q reads back as %+v, %v", s, cfg.Node(), again, err)
		}
		if p := cfg.SASLPassword; len(p) >= 4 && strings.Contains(cfg.Node(), p) && !strings.Contains(strings.Join(cfg.Brokers, ",")+cfg.Topic, p) {
			t.Fatalf("%q: the node %q shows the password", s, cfg.Node())
		}
	})
}

func FuzzParsePosition(f *testing.F) {
	for _, s := range []string{"", "0", "1235,988,1020", "01", "1,,2", "2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePosition(s)
		if err != nil {
			return
		}
		if p.String() != s {
			t.Fatalf("%q reads as %v, which is %q", s, p, p.String())
		}
	})
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"0/0", "2/1234", "02/3", "2/", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, o, err := ParseCursor(s)
		if err != nil {
			return
		}
		if FormatCursor(p, o) != s || p < 0 || o < 0 {
			t.Fatalf("%q reads as %d/%d", s, p, o)
		}
	})
}

var fuzzQueries = []string{"", "type = 'a.b'", "NOT type = 'orders'", "type MATCHES 'a.*' OR sourcehost EXISTS", "data.n = 1",
	"notcloudevent EXISTS", "id = '0/7' AND kafkapartition = '0'", "datacontenttype CONTAINS 'json'"}

// FuzzRecord: any record becomes an item whose raw form is one JSON object holding its
// cursor, its event (the type) and a CloudEvent; and a match on headers first agrees with
// a match on the event. The input is header lines "key: value" up to a blank line, then
// the value.
func FuzzRecord(f *testing.F) {
	f.Add([]byte("ce_specversion: 1.0\nce_id: 1\nce_source: /s\nce_type: a.b\ncontent-type: application/json\n\n{\"n\":1}"), uint8(1))
	f.Add([]byte("ce_specversion: 1.0\nce_id: 1\nce_source: /s\nce_type: a.b\nsourcehost: h\ncontent-type: application/avro\n\n\x00\x00\x00\x00\x01\x02"), uint8(3))
	f.Add([]byte("content-type: application/cloudevents+json\n\n{\"specversion\":\"1.0\",\"id\":\"1\",\"source\":\"/s\",\"type\":\"t\",\"data\":{\"n\":1}}"), uint8(4))
	f.Add([]byte("\n\nplain text"), uint8(5))
	f.Add([]byte("ce_specversion: 1.0\nce_id: \xff\nce_source: /s\nce_type: a.b\n\n{oops"), uint8(6))
	f.Fuzz(func(t *testing.T, in []byte, qi uint8) {
		head, value, _ := bytes.Cut(in, []byte("\n\n"))
		r := &kgo.Record{Offset: 7, Value: value, Timestamp: time.Unix(1700000000, 0)}
		for line := range bytes.SplitSeq(head, []byte("\n")) {
			k, v, ok := bytes.Cut(line, []byte(": "))
			if ok {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(k), Value: v})
			}
		}
		it := buildAll(t, r)
		var raw struct {
			Cursor string          `json:"cursor"`
			Event  string          `json:"event"`
			Data   json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(it.Raw, &raw); err != nil {
			t.Fatalf("raw is not JSON: %v\n%q", err, it.Raw)
		}
		var ev map[string]any
		if err := json.Unmarshal(it.Data, &ev); err != nil {
			t.Fatalf("data is not a JSON object: %v\n%q", err, it.Data)
		}
		if raw.Cursor != "0/7" || it.Cursor != "0/7" || raw.Event != it.Event || ev["type"] != it.Event || ev["specversion"] != "1.0" {
			t.Fatalf("item %q", it.Raw)
		}
		var buf bytes.Buffer
		if compact := json.Compact(&buf, it.Raw) == nil && bytes.Equal(buf.Bytes(), it.Raw); it.Compact != compact {
			t.Fatalf("Compact is %v for %q", it.Compact, it.Raw)
		}
		m, err := compileQuery(fuzzQueries[int(qi)%len(fuzzQueries)])
		if err != nil {
			t.Fatal(err)
		}
		_, got := newDecoder("orders").build(r, m)
		if want := m.q.MatchJSON(it.Data); got != want {
			t.Fatalf("query %q: matching on headers first says %v, the event %v\n%s", m.src, got, want, it.Data)
		}
	})
}

// FuzzRecordAfterOthers: a decoder that has read other records of the topic (which leave
// it what it keeps to read the next faster) makes of a record the item a new decoder
// makes, byte for byte, whether the record is like those before it or not. The input is
// up to three records apart by lines "---", each as FuzzRecord's input, with the headers
// of the record before it but for those it gives.
func FuzzRecordAfterOthers(f *testing.F) {
	edx := "ce_type: org.openedx.learning.course.enrollment.created.v1\nce_id: b3b3-1\nce_source: openedx/lms/web\n" +
		"ce_specversion: 1.0\nce_time: 2026-02-23T09:43:18.123456Z\nsourcehost: lms-1.example.com\ncontent-type: application/json\n\n"
	f.Add([]byte(edx + `{"user":{"id":1}}` + "\n---\nce_id: b3b3-2\n\n" + `{"user":{"id":2}}` + "\n---\nce_id: \x01\n\n" + `{"n": 3}`))
	f.Add([]byte(edx + `{"a":1}` + "\n---\nce_id: 2\n\n" + ` {"a": 2} ` + "\n---\nce_time: 2026-02-23T09:43:18,5Z\n\n" + `{"a":3}`))
	f.Add([]byte(edx + `{"a":1}` + "\n---\ncontent-type: text/plain\n\nhello\n---\ncontent-type: application/json\n\n{oops"))
	f.Add([]byte(edx + `{"a":1}` + "\n---\nce_id: \n\n{}\n---\nsourcehost: lms-2\nminorversion: 0\n\n{}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := compileQuery("")
		if err != nil {
			t.Fatal(err)
		}
		warm := newDecoder("orders")
		var hs []kgo.RecordHeader
		for i, part := range bytes.SplitN(in, []byte("\n---\n"), 3) {
			head, value, _ := bytes.Cut(part, []byte("\n\n"))
			var own []kgo.RecordHeader
			for line := range bytes.SplitSeq(head, []byte("\n")) {
				if k, v, ok := bytes.Cut(line, []byte(": ")); ok {
					own = append(own, kgo.RecordHeader{Key: string(k), Value: v})
				}
			}
			hs = mergeHeaders(hs, own)
			r := &kgo.Record{Partition: 1, Offset: int64(i), Value: value, Headers: hs, Timestamp: time.Unix(1700000000, 0)}
			w, wok := warm.build(r, m)
			c, cok := newDecoder("orders").build(r, m)
			if wok != cok || string(w.raw) != string(c.raw) || w.spaced != c.spaced || w.typ != c.typ {
				t.Fatalf("record %d %q:\nafter others: %v %s\nalone:        %v %s", i, part, wok, w.raw, cok, c.raw)
			}
		}
	})
}

// mergeHeaders is base with each header of over in place of base's of the same key, or
// added: a record like the one before but for what it says.
func mergeHeaders(base, over []kgo.RecordHeader) []kgo.RecordHeader {
	out := slices.Clone(base)
	for _, h := range over {
		i := slices.IndexFunc(out, func(b kgo.RecordHeader) bool { return b.Key == h.Key })
		if i < 0 {
			out = append(out, h)
		} else {
			out[i] = h
		}
	}
	return out
}

// FuzzIsStructured: isStructured decides as the media type, cut at its parameters and
// trimmed, says, whatever the input.
func FuzzIsStructured(f *testing.F) {
	for _, s := range []string{"application/json", "application/cloudevents+json", " Application/CloudEvents-batch+json; charset=utf-8",
		"\tapplication/cloudevents", "application/cloudevent;s", "\u00a0application/cloudevents", "\x01application/cloudevents", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		mt, _, _ := strings.Cut(ct, ";")
		mt = strings.TrimSpace(mt)
		want := len(mt) >= len("application/cloudevents") && strings.EqualFold(mt[:len("application/cloudevents")], "application/cloudevents") &&
			!strings.ContainsFunc(mt[:len("application/cloudevents")], func(r rune) bool { return r >= utf8.RuneSelf })
		if got := isStructured(ct); got != want {
			t.Fatalf("isStructured(%q) = %v, want %v", ct, got, want)
		}
	})
}
