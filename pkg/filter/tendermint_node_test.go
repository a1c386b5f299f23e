package filter

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/tmnode"
)

// fuzzFoundQueries are inputs that FuzzCheckTendermint and FuzzCompile found interesting.
var fuzzFoundQueries = []string{
	" 0", "((", "\a", "\x00", "\x7f", "!ˠ", ".=0", "0  ", "<<<", ".0<0", ".A=0", "0)))", "AƠ0", "A֢0",
	"\xa2", "\xfc", "яњ", ".00>0", "0 0 0", "0. 0.", "0.000", "0苓0", "=====", ">>>>>", "A=00 ", "Aя00",
	"\xcf0", "\xdf ", "      ", "''''''", "''≠0", "(__.<0", "TIME 0", "\u061c", "я\x9a", "(((((((", "00)))))",
	"A c0000", "DATE 0A", "TIME ZZA", "(Aر\x81", "NOT(NOT(", "A EXISTS0", "Ę Ę\xae", "ﺅó\xa9", "'''''''''",
	"0 0 0 0 0A", "A CONTAIN0", "A contain0", "TIME ZZZZA", "X containX", "\U000fa8fa", "(A......=00",
	"Aϭ (000000", "DATE --\x80", "0(((((((((!0", "A MATCHES'.'", "A=虠虠\xaa", "A=0܁\xf5\xa2", "(((A EXISTS)))",
	"A A A A OR A A", "A(A\U000507280", "AAAAAAAAAAA=0A", "00A(0(00A 00A 0", "A MATCHES'\xbf'", "A=0OR A=0OR A=0",
	"DATE 0000000000", "A EXISTS AND A 0", "\xf3\xac\xa6\xf30", ".000000000000000=00", "A A OR A EXISTS A A",
	".AAAAAAAA CONTAINS''", "A=''AND A=''AND A 00", "TIME 0000000000000000000", "é EXISTS AND A EXISTS AND",
	".0000000000000000000000=''0", ".00000000=''AND .000000000000=''0", "NOT NOT NOT NOT NOT",
	"A(0A(0A(0A(0A(0A!", "NOT  0 0 0 0 00A", "\u00a0\u2003a\u3000EXISTS\u0085", "a EXISTS\u200b",
	"a = TIME 2013-05-03T14:45:00.123+01:00", "a = TIME 2013-05-03t14:45:00Z", "a < DATE 2013-02-29",
	"a = 99999999999999999999999999.5", "a CONTAINS ''''", "x.y.z EXISTS AND AND EXISTS",
}

// TestQueriesAgainstTendermint sends a corpus of queries to a real Tendermint node and checks
// what it says of each against this package: CheckTendermint passes exactly the queries the
// node accepts; the model of the node's parser gives the node's message to the byte, with one
// difference on purpose ("want 6" is "want AND operator"); Compile accepts every query the node
// accepts and, where evtctl's additions are not in use, refuses the others in the node's words.
func TestQueriesAgainstTendermint(t *testing.T) {
	node := tmnode.Start(t, "create-empty-blocks=false", "event-log-max-items=20")
	var corpus []string
	for _, tc := range validQueries {
		corpus = append(corpus, tc.src)
	}
	for _, tc := range badQueries {
		corpus = append(corpus, tc.src)
	}
	for _, tc := range checkCases {
		corpus = append(corpus, tc.src)
	}
	corpus = append(corpus, fuzzFoundQueries...)

	accepted, refused := 0, 0
	for _, sent := range corpus {
		// The query as the node reads it: JSON carries invalid UTF-8 as U+FFFD.
		var src string
		if q, err := json.Marshal(sent); err != nil || json.Unmarshal(q, &src) != nil {
			t.Fatalf("%q: %v", sent, err)
		}
		body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "events", "params": map[string]any{
			"filter": map[string]string{"query": src}, "maxItems": 1, "before": "7fffffffffffffff-0000"}})
		if err != nil {
			t.Fatal(err)
		}
		nodeErr, ok := askNode(t, node.URL, body)
		if !ok {
			continue
		}
		tmErr := tendermintParse(src)
		check := CheckTendermint(src)
		_, compileErr := Compile(src)
		if nodeErr == "" {
			accepted++
			if tmErr != nil || check != nil || compileErr != nil && !limitError(compileErr) {
				t.Errorf("%q: the node accepts it; model %v, CheckTendermint %v, Compile %v", src, tmErr, check, compileErr)
			}
			continue
		}
		refused++
		want := strings.Replace(nodeErr, "want 6", "want "+tokAnd.String(), 1) // the one difference
		if tmErr == nil || tmErr.Error() != want {
			t.Errorf("%q: the node says %q; the model of its parser %v", src, nodeErr, tmErr)
		}
		if check == nil {
			t.Errorf("%q: the node refuses it (%q); CheckTendermint passes it", src, nodeErr)
		}
		if extension(src) == nil && !isSpace(src) && !limitError(compileErr) && (compileErr == nil || compileErr.Error() != want) {
			t.Errorf("%q: in Tendermint's language; the node says %q, Compile %v", src, nodeErr, compileErr)
		}
	}
	t.Logf("%d queries: the node accepts %d, refuses %d", len(corpus), accepted, refused)
	if accepted < 40 || refused < 100 {
		t.Fatalf("the corpus should hold many of both kinds")
	}
}

// askNode sends one events call and returns the node's message about the query ("" when it
// took the query); false when the node failed the call for another reason, which is reported.
func askNode(t *testing.T, url string, body []byte) (string, bool) {
	t.Helper()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	var r struct {
		Result json.RawMessage
		Error  *struct{ Data string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("the node's reply: %v", err)
	}
	switch {
	case r.Error == nil:
		return "", true
	case strings.HasPrefix(r.Error.Data, "invalid filter query: "):
		return strings.TrimPrefix(r.Error.Data, "invalid filter query: "), true
	}
	t.Errorf("%s: the node failed otherwise: %s", body, r.Error.Data)
	return "", false
}
