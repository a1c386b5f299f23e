package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"
	"unicode/utf8"
)

func TestDecodeParams(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want eventsParams
	}{
		{``, eventsParams{}},
		{`null`, eventsParams{}},
		{` {} `, eventsParams{}},
		{`[]`, eventsParams{}},
		{`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":5,"after":"a","before":"b","waitTime":2000000000}`,
			eventsParams{Query: "tm.event = 'Tx'", MaxItems: 5, After: "a", Before: "b", Wait: 2 * time.Second}},
		{`{"filter":"type = 'x'"}`, eventsParams{Query: "type = 'x'"}},
		{`{"filter":{}}`, eventsParams{}},
		{`{"filter":{"query":null}}`, eventsParams{}},
		{`{"filter":null,"maxItems":null,"after":null,"waitTime":null,"order":null}`, eventsParams{}},
		{`{"max_results":3,"wait_time":"1m30s"}`, eventsParams{MaxItems: 3, Wait: 90 * time.Second}},
		{`{"max_items":"4"}`, eventsParams{MaxItems: 4}},
		{`{"maxItems":2,"max_results":9}`, eventsParams{MaxItems: 2}},
		{`{"maxItems":-3}`, eventsParams{MaxItems: -3}},
		{`{"maxItems":99999999999}`, eventsParams{MaxItems: 1 << 31}},
		{`{"waitTime":"5s"}`, eventsParams{Wait: 5 * time.Second}},
		{`{"waitTime":"5000000000"}`, eventsParams{Wait: 5 * time.Second}},
		{`{"waitTime":1.5e9}`, eventsParams{Wait: 1500 * time.Millisecond}},
		{`{"waitTime":" 250ms "}`, eventsParams{Wait: 250 * time.Millisecond}},
		{`{"waitTime":0}`, eventsParams{}},
		// A negative wait is the default one, as a Tendermint node takes it.
		{`{"waitTime":-1}`, eventsParams{}},
		{`{"waitTime":"-1s"}`, eventsParams{}},
		{`{"waitTime":-4.6e18}`, eventsParams{}},
		{`{"order":"asc"}`, eventsParams{Ascending: true}},
		{`{"order":"Ascending"}`, eventsParams{Ascending: true}},
		{`{"order":"desc"}`, eventsParams{}},
		{`{"order":""}`, eventsParams{}},
		{`{"unknown":[1,2,3],"maxItems":1}`, eventsParams{MaxItems: 1}},
		{`[{"query":"q = 1"},7,"a","b",1000]`, eventsParams{Query: "q = 1", MaxItems: 7, After: "a", Before: "b", Wait: time.Microsecond}},
		{`["q = 1"]`, eventsParams{Query: "q = 1"}},
		{`[null,null,"a"]`, eventsParams{After: "a"}},
		// Names as a Tendermint node matches them: exactly or without regard to case, in order.
		{`{"MAXITEMS":3,"WaitTime":5,"AFTER":"a","Before":"b","Order":"asc","Filter":{"Query":"q"}}`,
			eventsParams{Query: "q", MaxItems: 3, Wait: 5, After: "a", Before: "b", Ascending: true}},
		{`{"maxItems":2,"maxitems":3}`, eventsParams{MaxItems: 3}},
		{`{"max_results":2,"MAXITEMS":3,"max_results":4}`, eventsParams{MaxItems: 3}},
		{`{"maxItems":2,"maxItems":null}`, eventsParams{MaxItems: 2}},
		{`{"after":"a","AFTER":"b"}`, eventsParams{After: "b"}},
		{"{\"m\u0061xItems\":4}", eventsParams{MaxItems: 4}},
		{"{\"m\u0061xItem\u017f\":4}", eventsParams{MaxItems: 4}}, // ſ folds to s, as in encoding/json
		{`{"filter":{"query":"a"},"filter":{}}`, eventsParams{Query: "a"}},
		{`{"filter":{"query":"a","QUERY":null}}`, eventsParams{Query: "a"}},
		{`{"filter":{"query":"a"},"filter":null}`, eventsParams{}},
		{`{"filter":"a","filter":{"query":"b"}}`, eventsParams{Query: "b"}},
	} {
		got, err := decodeParams(json.RawMessage(tc.raw))
		if err != nil {
			t.Fatalf("decodeParams(%s): %v", tc.raw, err)
		}
		if got != tc.want {
			t.Fatalf("decodeParams(%s) = %+v, want %+v", tc.raw, got, tc.want)
		}
	}
	for _, raw := range []string{
		`"x"`, `5`, `true`, `{`, `[1`, `{"maxItems":"abc"}`, `{"maxItems":1.5}`, `{"maxItems":1e3}`, `{"maxItems":[]}`,
		`{"waitTime":true}`, `{"waitTime":"NaN"}`, `{"waitTime":"Inf"}`, `{"waitTime":-1e300}`, `{"maxitems":"x"}`,
		`{"waitTime":1e300}`, `{"waitTime":"soon"}`, `{"after":5}`, `{"before":[]}`, `{"filter":7}`,
		`{"filter":{"query":7}}`, `{"filter":[]}`, `{"order":1}`, `{"order":"up"}`, `[1,2,3,4,5,6]`, `[7]`, `["",{}]`,
	} {
		p, err := decodeParams(json.RawMessage(raw))
		var pe *paramError
		if !errors.As(err, &pe) {
			t.Fatalf("decodeParams(%s) = %+v, %v; want a paramError", raw, p, err)
		}
	}
}

func TestParamsFromQuery(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  eventsParams
	}{
		{``, eventsParams{}},
		{`maxItems=3&waitTime=1000000000&before=%22c1%22`, eventsParams{MaxItems: 3, Wait: time.Second, Before: "c1"}},
		{`after=c2&before=`, eventsParams{After: "c2"}},
		{`query=tm.event+%3D+%27Tx%27&order=asc`, eventsParams{Query: "tm.event = 'Tx'", Ascending: true}},
		{`filter=%22a+%3D+1%22`, eventsParams{Query: "a = 1"}},
		{`query=x&filter=y`, eventsParams{Query: "x"}},
		{`max_results=4&wait_time=2s`, eventsParams{MaxItems: 4, Wait: 2 * time.Second}},
		{`maxItems=&waitTime=`, eventsParams{}},
		{`maxItems=%225%22`, eventsParams{MaxItems: 5}},
		{`after=%22`, eventsParams{After: `"`}},
		{`order=DESC`, eventsParams{}},
		{`waitTime=-1&wait_time=-5s`, eventsParams{}},
		{`maxitems=3`, eventsParams{}}, // as from a Tendermint node, GET names are matched exactly
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := paramsFromQuery(q)
		if err != nil {
			t.Fatalf("paramsFromQuery(%s): %v", tc.query, err)
		}
		if got != tc.want {
			t.Fatalf("paramsFromQuery(%s) = %+v, want %+v", tc.query, got, tc.want)
		}
	}
	for _, query := range []string{`maxItems=x`, `maxItems=1.5`, `waitTime=NaN`, `wait_time=soon`, `order=up`} {
		q, _ := url.ParseQuery(query)
		if p, err := paramsFromQuery(q); err == nil {
			t.Fatalf("paramsFromQuery(%s) = %+v, want an error", query, p)
		}
	}
}

// encodeParams writes p as a JSON params object that decodeParams reads back as p.
func encodeParams(p eventsParams) []byte {
	order := "desc"
	if p.Ascending {
		order = "asc"
	}
	b, err := json.Marshal(map[string]any{
		"filter":   map[string]string{"query": p.Query},
		"maxItems": p.MaxItems,
		"after":    p.After,
		"before":   p.Before,
		"waitTime": p.Wait.String(),
		"order":    order,
	})
	if err != nil {
		panic(err)
	}
	return b
}

// checkSane checks the invariants of accepted params.
func checkSane(t *testing.T, in string, p eventsParams) {
	t.Helper()
	if p.Wait < 0 {
		t.Fatalf("%q: accepted with a negative wait %v", in, p.Wait)
	}
	if p.MaxItems > 1<<31 || p.MaxItems < -1<<31 {
		t.Fatalf("%q: maxItems %d out of range", in, p.MaxItems)
	}
}

func FuzzDecodeParams(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`,
		`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":2,"waitTime":1000000000}`,
		`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":2,"before":"18ea61a240447c6e-00b7","waitTime":1000000000}`,
		`{"after":"zzz"}`, `{"waitTime":"5s"}`, `{"waitTime":"NaN"}`, `{"waitTime":"1e400"}`, `{"waitTime":4.611686018427388e18}`,
		`{"max_results":"12","wait_time":"1h"}`, `{"maxItems":-99999999999999999999}`, `{"order":"ASC"}`,
		`[{"query":"a = 1"},5,"a","b",100]`, `["x",null,null,null,"2s"]`, `{"filter":"\u00e9\ud800"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := decodeParams(raw)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || err.Error() == "" {
				t.Fatalf("%q: error %v is not a described paramError", raw, err)
			}
			return
		}
		checkSane(t, string(raw), p)
		enc := encodeParams(p)
		q, err := decodeParams(enc)
		if err != nil {
			t.Fatalf("%q: accepted as %+v, but its encoding %s is refused: %v", raw, p, enc, err)
		}
		if q != p {
			t.Fatalf("%q: decoded %+v, re-encoded %s, decoded again %+v", raw, p, enc, q)
		}
	})
}

// encodeValue writes s for the query string: bare, or JSON-quoted when bare would unquote.
func encodeValue(s string) (string, bool) {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if !utf8.ValidString(s) {
			return "", false
		}
		b, _ := json.Marshal(s)
		return string(b), true
	}
	return s, true
}

func FuzzParamsFromQuery(f *testing.F) {
	for _, s := range []string{
		``, `maxItems=3&waitTime=1000000000`, `before=%2218ea61a240447c6e-00b7%22`, `after="x"&order=asc`,
		`query=tm.event+%3D+%27Tx%27`, `filter="%22"`, `wait_time=1m&max_results=+7`, `waitTime=NaN`,
		`maxItems=99999999999999999999`, `order=Descending&waitTime=1e18`, `after=%ff%fe`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		vals, _ := url.ParseQuery(raw) // what parsed, as a server would see it
		p, err := paramsFromQuery(vals)
		if err != nil {
			var pe *paramError
			if !errors.As(err, &pe) || err.Error() == "" {
				t.Fatalf("%q: error %v is not a described paramError", raw, err)
			}
			return
		}
		if p.Wait < 0 {
			t.Fatalf("%q: accepted with a negative wait %v", raw, p.Wait)
		}
		enc := url.Values{}
		for k, s := range map[string]string{"query": p.Query, "after": p.After, "before": p.Before} {
			v, ok := encodeValue(s)
			if !ok {
				return
			}
			enc.Set(k, v)
		}
		enc.Set("maxItems", strconv.Itoa(p.MaxItems))
		enc.Set("waitTime", p.Wait.String())
		if p.Ascending {
			enc.Set("order", "asc")
		}
		q, err := paramsFromQuery(enc)
		if err != nil {
			t.Fatalf("%q: accepted as %+v, but its encoding %s is refused: %v", raw, p, enc.Encode(), err)
		}
		if q != p {
			t.Fatalf("%q: decoded %+v, re-encoded %s, decoded again %+v", raw, p, enc.Encode(), q)
		}
		// Reading the same values through JSON gives the same params (maxItems aside: the
		// JSON decoder clamps it).
		if p.MaxItems == int(int32(p.MaxItems)) && utf8.ValidString(p.Query+p.After+p.Before) {
			j, err := decodeParams(encodeParams(p))
			if err != nil || j != p {
				t.Fatalf("%q: GET reads %+v, the same as JSON reads %+v, %v", raw, p, j, err)
			}
		}
	})
}

// membersByDecoder splits a JSON object with encoding/json's token walk.
func membersByDecoder(raw []byte) ([]member, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if _, err := d.Token(); err != nil {
		return nil, err
	}
	var ms []member
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, err
		}
		var m member
		m.name = t.(string)
		if err := d.Decode(&m.val); err != nil {
			return nil, err
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// objectMembers splits an object as encoding/json reads it, member for member.
func FuzzObjectMembers(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"a":1}`, `{"a":1,"b":"x","c":null,"d":true,"e":[1,{"f":"}"}],"g":{"h":[]}}`,
		`{"a\"b":"c\\","\u0061":-1.5e3, "é":"\ud800"}`, "{\"a\xff\":0}", `{"a":"]}\"","b":[[],[]]}`,
		`{"maxItems":1,"MAXITEMS":2}`, `{"a":1}x`, `{"a":}`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '{' {
			return // decodeParams asks only for what starts as an object
		}
		if !json.Valid(raw) {
			if _, err := objectMembers(raw); err == nil {
				t.Fatalf("%q: not valid JSON, yet split", raw)
			}
			return
		}
		got, err := objectMembers(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		want, err := membersByDecoder(raw)
		if err != nil {
			t.Fatalf("%q: the decoder: %v", raw, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", raw, len(got), len(want))
		}
		for i := range got {
			if got[i].name != want[i].name || !bytes.Equal(got[i].val, want[i].val) {
				t.Fatalf("%q: member %d is %q: %s, want %q: %s", raw, i, got[i].name, got[i].val, want[i].name, want[i].val)
			}
		}
	})
}
