package cevent

import (
	"errors"
	"strings"
	"testing"
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
