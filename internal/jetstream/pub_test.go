package jetstream

import (
	"encoding/json"
	"testing"
)

func TestPlainAck(t *testing.T) {
	for _, tc := range []struct {
		in      string
		seq     uint64
		dup, ok bool
	}{
		{`{"stream":"EVTCTL","seq":42}`, 42, false, true},
		{`{"stream":"EVTCTL","seq":7,"duplicate": true}`, 7, true, true},
		{`{"stream":"EVTCTL","domain":"hub","seq":9,"duplicate":false}`, 9, false, true},
		{`{"stream":"EVTCTL","seq": 18446744073709551615}`, 18446744073709551615, false, true},
		{`{"error":{"code":400,"err_code":10070,"description":"wrong last msg ID: x"},"stream":"EVTCTL","seq":0}`, 0, false, false},
		{`{"stream":"EVTCTL","seq":18446744073709551616}`, 0, false, false},
		{`{"stream":"EVTCTL","seq":"1"}`, 0, false, false},
		{`{"stream":"EVTCTL","seq":1,"duplicate":maybe}`, 0, false, false},
		{`{"stream":"EVTCTL"}`, 0, false, false},
		{``, 0, false, false},
	} {
		seq, dup, ok := plainAck([]byte(tc.in))
		if seq != tc.seq || dup != tc.dup || ok != tc.ok {
			t.Errorf("plainAck(%s) = %d, %v, %v; want %d, %v, %v", tc.in, seq, dup, ok, tc.seq, tc.dup, tc.ok)
		}
	}
}

// What plainAck accepts, encoding/json reads the same way: no error, the same sequence
// and duplicate flag.
func FuzzPlainAck(f *testing.F) {
	f.Add([]byte(`{"stream":"S","seq":1}`))
	f.Add([]byte(`{"stream":"S","seq":3,"duplicate": true}`))
	f.Add([]byte(`{"stream":"S","seq":3,"duplicate":false,"domain":"d"}`))
	f.Add([]byte(`{"error":{"err_code":10071},"stream":"S","seq":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		seq, dup, ok := plainAck(b)
		if !ok {
			return
		}
		var a pubAck
		if err := json.Unmarshal(b, &a); err != nil {
			return // not JSON at all: the server does not send that; plainAck only looks for its fields
		}
		if a.Error != nil || a.Seq != seq || a.Duplicate != dup {
			t.Fatalf("plainAck(%q) = %d, %v; encoding/json reads %+v", b, seq, dup, a)
		}
	})
}
