package deliver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/evtctl/evtctl/pkg/cevent"
)

// FuzzEncodeHeaderValue checks that decoding undoes EncodeHeaderValue, that
// its output has only the bytes the HTTP binding allows unencoded, and
// that the node's decoder reads valid strings back intact.
func FuzzEncodeHeaderValue(f *testing.F) {
	for _, s := range []string{"", "plain", "a b", `"q"`, "100%", "%20", "é☃", "\x00\x7f\xff", "~!#$&'()*+,/:;=?@[]", "tab\there"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := EncodeHeaderValue(s)
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; c < 0x21 || c > 0x7e || c == '"' {
				t.Fatalf("EncodeHeaderValue(%q) = %q has byte %#x", s, enc, c)
			}
		}
		if strings.Count(enc, "%") != (len(enc)-len(s))/2 {
			t.Fatalf("EncodeHeaderValue(%q) = %q: a '%%' that does not start an escape", s, enc)
		}
		dec, err := url.PathUnescape(enc)
		if err != nil || dec != s {
			t.Fatalf("PathUnescape(EncodeHeaderValue(%q) = %q) = %q, %v", s, enc, dec, err)
		}
		// The node decodes the value of a ce- header back to s, whenever s
		// is a valid id (as the structured decoder judges it).
		js, _ := json.Marshal(map[string]string{"specversion": "1.0", "id": s, "source": "/s", "type": "t"})
		if _, err := cevent.DecodeStructured(js, cevent.Limits{}); err != nil || !utf8.ValidString(s) {
			return
		}
		h := http.Header{"Ce-Specversion": {"1.0"}, "Ce-Id": {enc}, "Ce-Source": {"/s"}, "Ce-Type": {"t"}}
		if ev, err := cevent.DecodeBinary(h, nil, cevent.Limits{}); err != nil || ev.ID != s {
			t.Fatalf("node decoded %q as id %q (%v), want %q", enc, ev.ID, err, s)
		}
	})
}
