package client

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/tidwall/gjson"
)

// parseReplyGJSON is the reply decoder as it was written with gjson's nested iteration:
// the model the single-walk parseReply must agree with.
func parseReplyGJSON(data []byte) (*Reply, error) {
	bad := func(msg string) error { return &DecodeError{Err: errors.New(msg), Body: prefix(data, 80)} }
	s := unsafe.String(unsafe.SliceData(data), len(data))
	if !gjson.Valid(s) {
		return nil, bad("not valid JSON")
	}
	top := gjson.Parse(s)
	if !top.IsObject() {
		return nil, bad("not a JSON object")
	}
	// One walk over the top level: Get would scan the whole result for each name.
	var res, rpcErr gjson.Result
	top.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "result":
			res = v
		case "error":
			rpcErr = v
		}
		return true
	})
	if rpcErr.Exists() && rpcErr.Type != gjson.Null {
		var re RPCError
		if err := json.Unmarshal([]byte(rpcErr.Raw), &re); err != nil {
			return nil, bad("an error member that is not a JSON-RPC error")
		}
		return nil, &re
	}
	if !res.IsObject() {
		return nil, bad("no result and no error")
	}
	r := &Reply{}
	var err error
	res.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "items":
			if v.Type == gjson.Null {
				return true
			}
			if !v.IsArray() {
				err = bad("items is not an array")
				return false
			}
			r.Items = []Item{}
			v.ForEach(func(_, iv gjson.Result) bool {
				it, ok := parseItemGJSON(iv)
				if !ok {
					err = bad("an item is not an object with a string cursor")
					return false
				}
				r.Items = append(r.Items, it)
				return true
			})
		case "more":
			r.More = v.Type == gjson.True
		case "oldest":
			r.Oldest = v.Str
		case "newest":
			r.Newest = v.Str
		case "order":
			r.Order = v.Str
		}
		return err == nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func parseItemGJSON(v gjson.Result) (Item, bool) {
	if !v.IsObject() {
		return Item{}, false
	}
	it := Item{Raw: bytesOf(v.Raw)}
	hasCursor := false
	v.ForEach(func(k, f gjson.Result) bool {
		switch k.Str {
		case "cursor":
			it.Cursor, hasCursor = f.Str, f.Type == gjson.String
		case "event":
			it.Event = f.Str
		case "data":
			it.Data = bytesOf(f.Raw)
		}
		return true
	})
	return it, hasCursor
}

// bytesOf views a substring of a reply as bytes, without copying.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// sameDecoding fails t unless parseReply and the gjson model agree on data.
func sameDecoding(t *testing.T, data []byte) {
	t.Helper()
	got, gerr := parseReply(data)
	want, werr := parseReplyGJSON(data)
	if (gerr == nil) != (werr == nil) {
		t.Fatalf("%q: error %v, the model's %v", data, gerr, werr)
	}
	if gerr != nil {
		var gre, wre *RPCError
		if errors.As(gerr, &gre) != errors.As(werr, &wre) || gerr.Error() != werr.Error() {
			t.Fatalf("%q: error %v, the model's %v", data, gerr, werr)
		}
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %+v\nwant %+v", data, got, want)
	}
}

func TestParseReplyAgreesWithModel(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(capturesDir, "*.json"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sameDecoding(t, b)
	}
	for _, body := range replySeeds {
		sameDecoding(t, []byte(body))
	}
}

var replySeeds = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"items":[{"cursor":"18ea61a27c39abd8-0000000000000001","event":"t","data":{"a":[1,{"b":"}]"}]}}],"more":true,"oldest":"o","newest":"n","order":"asc"}}`,
	` { "result" : { "items" : [ { "data" : "x\\\"]}" , "cursor" : "c\u0041" , "event" : "e\n" } , {"cursor":"d"} ] , "more" : false } } `,
	`{"result":{"items":null,"more":1,"oldest":5,"newest":null,"order":["asc"]}}`,
	`{"result":{"items":[],"items":[{"cursor":"x"}]},"result":{"items":[{"cursor":"y","cursor":3}]}}`,
	`{"result":{"it\u0065ms":[{"cursor":"z","data":-1.5e3}]}}`,
	`{"result":{"items":{}}}`,
	`{"result":{"items":[1]}}`,
	`{"result":{"items":[{"cursor":"a"},{"event":"no cursor"}]}}`,
	`{"error":null,"result":{}}`,
	`{"error":{"code":-32000,"message":"busy","data":"retry"}}`,
	`{"error":"text"}`,
	`{"result":[]}`,
	`[]`,
	`"s"`,
	`{}`,
	`{"result":{"items":[{"cursor":"a","data":{"k":"\\"}}],"more":true}}`,
}

// FuzzParseReplyAgreesWithModel: the single-walk decoder gives what gjson's nested
// iteration gives, for any body.
func FuzzParseReplyAgreesWithModel(f *testing.F) {
	for _, s := range replySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameDecoding(t, data) })
}
