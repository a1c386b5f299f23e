package cevent

import (
	"errors"
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
