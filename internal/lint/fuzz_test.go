package lint

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/evtctl/evtctl/internal/cevent"
)

func FuzzCheck(f *testing.F) {
	f.Add([]byte(validEvent))
	f.Add([]byte(`{"specversion":"1.0","id":"x","source":"/s","type":"T","time":"2020-02-23T10:43:18+01:00","minorversion":"1","pii":"no"}`))
	f.Add([]byte(`{"specversion":"2.0","data":{"a":1,"a":2},"data_base64":"!!","Foo":[1]}`))
	f.Add([]byte(`{"id":null,"type":"a..b.v01","abcdefghijklmnopqrstuvwxyz":1.5}`))
	f.Add([]byte(`{"x":`))
	f.Add([]byte(`[]`))
	f.Add([]byte("{\"id\":\"\xff\"}"))
	sev := map[string]Severity{}
	for _, r := range Rules() {
		sev[r.ID] = r.Severity
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		fs := Check(in, Options{})
		if !bytes.Equal(in, orig) {
			t.Fatal("Check modified its input")
		}
		seen := map[Finding]bool{}
		specs := 0
		for _, f := range fs {
			if s, ok := sev[f.Rule]; !ok || s != f.Severity || f.Message == "" {
				t.Fatalf("unknown rule or wrong severity: %+v", f)
			}
			if seen[f] {
				t.Fatalf("duplicate finding: %+v", f)
			}
			seen[f] = true
			if f.Rule == "spec" {
				specs++
			}
		}
		if !json.Valid(in) && (len(fs) != 1 || fs[0].Rule != "spec") {
			t.Fatalf("malformed JSON %q gave\n%s", in, dump(fs))
		}
		// The spec rule agrees with the node's ingest validator.
		_, err := cevent.DecodeStructured(in, cevent.Limits{MaxEventBytes: 1 << 30})
		if (err != nil) != (specs > 0) {
			t.Fatalf("cevent says %v but Check gave\n%s", err, dump(fs))
		}
	})
}
