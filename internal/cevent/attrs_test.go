package cevent

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func kattrs(kv ...string) []Attr {
	var as []Attr
	for i := 0; i+1 < len(kv); i += 2 {
		as = append(as, Attr{Name: kv[i], Key: "ce_" + kv[i], Value: kv[i+1]})
	}
	return as
}

func TestAttrDecoder(t *testing.T) {
	var d AttrDecoder
	// Values are taken as they are: no percent-decoding, no unquoting.
	out, ev, err := d.DecodeAppend([]byte("prefix:"), kattrs("type", "t", "specversion", "1.0", "id", "a%20b", "source", "/s", "subject", `"q"`),
		"application/json", true, []byte(` {"x": 1} `))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"specversion":"1.0","id":"a%20b","source":"/s","type":"t","subject":"\"q\"","datacontenttype":"application/json","data": {"x": 1} }`
	if string(out) != "prefix:"+want || string(ev.JSON) != want || ev.ID != "a%20b" {
		t.Fatalf("got %s / %s", out, ev.JSON)
	}
	for _, c := range []struct {
		attrs []Attr
		ct    string
		want  string
	}{
		{kattrs("specversion", "1.0", "id", "1", "type", "t"), "", `missing required attribute "source" (header ce_source)`},
		{kattrs("specversion", "1.0", "id", "1", "source", "a b", "type", "t"), "", `not allowed in a URI`},
		{kattrs("specversion", "1.0", "id", "1", "source", "/s", "type", "t", "datacontenttype", "x/y"), "", `header ce_datacontenttype is not allowed in binary mode: datacontenttype is carried by content-type`},
		{kattrs("specversion", "1.0", "id", "1", "source", "/s", "type", "t"), "nonsense", `content-type "nonsense" is not a valid media type`},
		{kattrs("specversion", "1.0", "id", "1", "source", "/s", "type", "t\x7f"), "", `control character U+007F`},
	} {
		_, err := d.Decode(c.attrs, c.ct, c.ct != "", nil)
		var e *Error
		if !errors.As(err, &e) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.attrs, err, c.want)
		}
	}
	// What passed before is remembered, but a new value is checked.
	ok := kattrs("specversion", "1.0", "id", "1", "source", "/s", "type", "t")
	if _, err := d.Decode(ok, "text/plain", true, []byte("x")); err != nil {
		t.Fatal(err)
	}
	bad := kattrs("specversion", "1.0", "id", "1", "source", "/s t", "type", "t")
	if _, err := d.Decode(bad, "text/plain", true, []byte("x")); err == nil {
		t.Error("an invalid source passed after a valid one")
	}
	if _, err := d.Decode(ok, "text/plain; charset=", true, []byte("x")); err == nil {
		t.Error("an invalid content type passed after a valid one")
	}
	if !ValidString("héllo") || ValidString("a\x7fb") || ValidString("\uFFFE") || ValidRune(0x85) || !ValidRune('é') {
		t.Error("ValidString / ValidRune")
	}
}

// TestAttrDecoderKeepsNoViews: the values an AttrDecoder is given may be views of memory
// its caller reuses (a Kafka client's pooled record buffers). What it remembers of one
// event must not change when that memory is written over.
func TestAttrDecoderKeepsNoViews(t *testing.T) {
	var d AttrDecoder
	mem := []byte("text/plain; Charset=utf-8|/src|https://example.com/schema")
	view := func(i, j int) string { return unsafe.String(&mem[i], j-i) }
	attrs := kattrs("specversion", "1.0", "id", "1", "source", view(26, 30), "type", "t", "dataschema", view(31, len(mem)))
	if _, err := d.Decode(attrs, view(0, 25), true, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for i := range mem {
		mem[i] = '#' // the caller's memory, reused
	}
	ev, err := d.Decode(kattrs("specversion", "1.0", "id", "2", "source", "/src", "type", "t", "dataschema", "https://example.com/schema"),
		"text/plain; Charset=utf-8", true, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"specversion":"1.0","id":"2","source":"/src","type":"t","datacontenttype":"text/plain; Charset=utf-8","dataschema":"https://example.com/schema","data":"x"}`
	if string(ev.JSON) != want {
		t.Fatalf("after the first event's memory was reused:\n got %s\nwant %s", ev.JSON, want)
	}
}

// TestAttrDecoderChecksAfterReuse: a value that passed, whose memory is then reused for
// an invalid one, does not let the invalid one pass unchecked.
func TestAttrDecoderChecksAfterReuse(t *testing.T) {
	var d AttrDecoder
	mem := []byte("/s1")
	if _, err := d.Decode(kattrs("specversion", "1.0", "id", "1", "source", unsafe.String(&mem[0], len(mem)), "type", "t"), "", false, nil); err != nil {
		t.Fatal(err)
	}
	copy(mem, "a b") // the caller's memory, reused for a source that is no URI reference
	if _, err := d.Decode(kattrs("specversion", "1.0", "id", "2", "source", "a b", "type", "t"), "", false, nil); err == nil {
		t.Fatal(`source "a b" passed unchecked`)
	}
}

// decodeBoth decodes one event with d, which has seen the events before, and with a new
// decoder, which has not: what they make and say must be the same, byte for byte.
func decodeBoth(t *testing.T, d *AttrDecoder, attrs []Attr, ct string, hasCT bool, body []byte) {
	t.Helper()
	cold := AttrDecoder{Limits: d.Limits}
	prefix := []byte("line:")
	wOut, wEv, wErr := d.DecodeAppend(prefix[:len(prefix):len(prefix)], attrs, ct, hasCT, body)
	cOut, cEv, cErr := cold.DecodeAppend(prefix[:len(prefix):len(prefix)], attrs, ct, hasCT, body)
	if (wErr == nil) != (cErr == nil) || wErr != nil && wErr.Error() != cErr.Error() {
		t.Fatalf("%q ct %q (%v) data %q:\nafter others: %v\nalone:        %v", attrs, ct, hasCT, body, wErr, cErr)
	}
	if string(wOut) != string(cOut) || string(wEv.JSON) != string(cEv.JSON) || wEv.ID != cEv.ID ||
		wEv.Source != cEv.Source || wEv.Type != cEv.Type || !wEv.Time.Equal(cEv.Time) || wEv.Time.Location() != cEv.Time.Location() {
		t.Fatalf("%q ct %q (%v) data %q:\nafter others: %s %+v\nalone:        %s %+v", attrs, ct, hasCT, body, wOut, wEv, cOut, cEv)
	}
}

// Events of one producer, built from what the events before them left (templates), are
// the events a decoder that saw none builds, and so are the refusals, whatever varies:
// ids and times good and bad, other attributes, their order, data, sizes.
func TestAttrDecoderAfterOthers(t *testing.T) {
	t.Parallel()
	ids := []string{"b3b3981e-7544-11ea-b663-000000000001", "2", "", "  ", "é-1", "a\x01b", "x\uFFFEy", "q\"uote", "a\x7fb"}
	times := []string{"2026-02-23T09:43:18.123456Z", "2026-02-23T09:43:18Z", "2026-02-23T10:43:18.1+01:00", "2026-02-23T09:43:18,1Z",
		"yesterday", "2026-13-01T00:00:00Z", "2026-02-23T09:43:18Z\x00", "２026-02-23T09:43:18Z"}
	sources := []string{"openedx/lms/web", "/s", "a b"}
	types := []string{"org.openedx.learning.course.enrollment.created.v1", "t2", "t\x7f"}
	cts := []string{"application/json", "application/json; charset=utf-8", "text/plain", "application/octet-stream", "nonsense", ""}
	bodies := []string{`{"user":{"id":1},"mode":"audit"}`, ` {"a": [1, 2.5e3, null, true, "é"]} `, `{"a":1,"a":2}`, `{"a":`, "plain text", "\xff\xfe", "",
		`{"pad":"` + strings.Repeat("x", 300) + `"}`}
	r := rand.New(rand.NewPCG(1, 2))
	pick := func(xs []string) string {
		if r.IntN(4) > 0 {
			return xs[0] // mostly what a producer sends every time
		}
		return xs[r.IntN(len(xs))]
	}
	d := AttrDecoder{Limits: Limits{MaxEventBytes: 640}}
	hits := 0
	const events = 4000
	for i := range events {
		attrs := []Attr{
			{Name: "type", Key: "ce_type", Value: pick(types)},
			{Name: "id", Key: "ce_id", Value: ids[r.IntN(2)]},
			{Name: "source", Key: "ce_source", Value: pick(sources)},
			{Name: "specversion", Key: "ce_specversion", Value: "1.0"},
			{Name: "time", Key: "ce_time", Value: times[r.IntN(3)]},
			{Name: "sourcehost", Key: "sourcehost", Value: "lms-1.example.com"},
		}
		if r.IntN(8) == 0 {
			attrs[1].Value = ids[r.IntN(len(ids))]
		}
		if r.IntN(8) == 0 {
			attrs[4].Value = times[r.IntN(len(times))]
		}
		switch r.IntN(16) {
		case 0:
			attrs = attrs[:4] // no time, no extension
		case 1:
			attrs = append(attrs, Attr{Name: "subject", Key: "ce_subject", Value: "course-v1:edX+DemoX"})
		case 2:
			attrs = append(attrs, Attr{Name: "minorversion", Key: "minorversion", Value: strconv.Itoa(r.IntN(3))})
		case 3:
			attrs[0], attrs[2] = attrs[2], attrs[0]
		case 4:
			attrs = append(attrs, Attr{Name: "id", Key: "ce_id", Value: "again"})
		case 5:
			attrs = append(attrs, Attr{Name: "dataschema", Key: "ce_dataschema", Value: pick([]string{"https://example.com/s.json", "::"})})
		}
		ct := pick(cts)
		for _, tp := range d.tpls {
			if tp != nil && tp.match(attrs, ct, ct != "") {
				hits++
				break
			}
		}
		decodeBoth(t, &d, attrs, ct, ct != "", []byte(pick(bodies)))
		if t.Failed() {
			t.Fatalf("event %d", i)
		}
	}
	if hits < events/5 {
		t.Fatalf("only %d of %d events fit a template: the test does not test them", hits, events)
	}
}

// A producer whose attributes vary in every event makes a template now and then only.
func TestAttrDecoderTemplatesBounded(t *testing.T) {
	var d AttrDecoder
	made := 0
	var last *attrTemplate
	for i := range 1000 {
		attrs := kattrs("specversion", "1.0", "id", "1", "source", "/s", "type", "t", "trace", strconv.Itoa(i))
		if _, err := d.Decode(attrs, "application/json", true, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		if p := d.tpls[(d.next+maxTemplates-1)%maxTemplates]; p != last {
			made, last = made+1, p
		}
	}
	if made > 1000/templateCost+maxTemplates {
		t.Fatalf("%d templates made for 1000 events", made)
	}
}

func FuzzAttrDecoderAfterOthers(f *testing.F) {
	f.Add("b3b3981e-1", "2026-02-23T09:43:18.123456Z", `{"a":1}`, "b3b3981e-2", "2026-02-23T09:43:19Z", `{"a":2}`, "application/json", "lms-1")
	f.Add("1", "2026-02-23T09:43:18Z", `{"a":1}`, "\x01", "2026-02-23T09:43:18,5Z", `{"a":1,"a":1}`, "", "x\x7f")
	f.Fuzz(func(t *testing.T, id1, time1, body1, id2, time2, body2, ct, ext string) {
		attrs := func(id, tm string) []Attr {
			return []Attr{
				{Name: "type", Key: "ce_type", Value: "org.openedx.x.v1"},
				{Name: "id", Key: "ce_id", Value: id},
				{Name: "source", Key: "ce_source", Value: "openedx/lms/web"},
				{Name: "specversion", Key: "ce_specversion", Value: "1.0"},
				{Name: "time", Key: "ce_time", Value: tm},
				{Name: "sourcehost", Key: "sourcehost", Value: ext},
			}
		}
		d := AttrDecoder{Limits: Limits{MaxEventBytes: 512}}
		decodeBoth(t, &d, attrs(id1, time1), ct, ct != "", []byte(body1))
		decodeBoth(t, &d, attrs(id2, time2), ct, ct != "", []byte(body2))
		decodeBoth(t, &d, attrs(id1, time2), ct, ct != "", []byte(body1))
	})
}
