package server

import (
	"bytes"
	"reflect"
	"testing"
)

var fastDecodeSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1,"after":"18ea61a27c39abd8-0000000000000001","waitTime":30000000000}}`,
	`{"jsonrpc":"2.0","id":"a-1","method":"events","params":{"maxItems":3,"before":"18ea61a27c39abd8-01","order":"asc"}}`,
	` { "method" : "events" , "jsonrpc" : "2.0" , "params" : { } , "id" : -0 } `,
	`{"jsonrpc":"2.0","method":"events"}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":99999999999,"waitTime":0,"order":"DESC"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":-99999999999}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"order":"sideways"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"waitTime":-5}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"waitTime":1.5}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1e3}}`,
	`{"jsonrpc":"2.0","id":01,"method":"events"}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1,"maxItems":2}}`,
	`{"jsonrpc":"2.0","id":1,"id":2,"method":"events"}`,
	`{"jsonrpc":"2.0","ID":1,"method":"events"}`,
	`{"jsonrpc":"2.0","id":null,"method":"events"}`,
	`{"jsonrpc":"1.0","id":1,"method":"events"}`,
	`{"jsonrpc":"2.0","id":1,"method":"status"}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":[null,1]}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"filter":{"query":"type = 'a'"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"after":"a\u00e9"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"after":"é"}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events"}x`,
	`{"jsonrpc":"2.0","id":1,"method":"events",}`,
	`{"jsonrpc":"2.0" "id":1}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxItems":1,"MAXITEMS":2}}`,
	`{"jsonrpc":"2.0","id":1,"method":"events","params":{"maxitems":1}}`,
	`{"id":1,"method":"events","params":{}}`,
	`{"jsonrpc":"2.0","method":"events","params":{"maxItems":1}}`,
	`{"jsonrpc":"2.0","id":1.5,"method":"events"}`,
	`{}`,
	`[]`,
	``,
}

// The fast decoder, whenever it takes a request, gives exactly what the general one gives.
func TestDecodeCallFastAgreesWithSlow(t *testing.T) {
	took := 0
	for _, s := range fastDecodeSeeds {
		if checkFastDecode(t, []byte(s)) {
			took++
		}
	}
	if took < 5 {
		t.Fatalf("the fast decoder took %d of the sample requests; it should take the plain ones", took)
	}
}

func checkFastDecode(t *testing.T, raw []byte) bool {
	t.Helper()
	id, p, ok := decodeCallFast(raw)
	if !ok {
		return false
	}
	wid, wp, rerr := decodeCallSlow(raw)
	if rerr != nil {
		t.Fatalf("%s: the fast decoder took a request the general one refuses (%s)", raw, rerr.Data)
	}
	if !bytes.Equal(id, wid) || !reflect.DeepEqual(p, *wp) {
		t.Fatalf("%s: fast decoding gave id %s %+v, want id %s %+v", raw, id, p, wid, *wp)
	}
	return true
}

func FuzzDecodeCallFast(f *testing.F) {
	for _, s := range fastDecodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkFastDecode(t, bytes.TrimSpace(raw)) })
}
