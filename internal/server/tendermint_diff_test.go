package server_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
	"github.com/evtctl/evtctl/internal/tmnode"
)

// The differences between an evtctl node's `events` method and a Tendermint node's that
// remain on purpose. TestAgainstTendermint checks each against both nodes, and the manual's
// section "evtctl and Tendermint" holds this table as it is.
var deliberateDifferences = []struct {
	key, tendermint, evtctl, why string
	check                        func(tm, ev exchange) error
}{
	{"params-optional", "`params` left out: -32602", "all defaults",
		"no params asks for the defaults; refusing that helps no one", both(errCode(-32602), isResult)},
	{"positional-short", "fewer than 5 positional params: -32602", "the rest take their defaults",
		"as for absent params", both(errCode(-32602), isResult)},
	{"lenient-types", "`waitTime` as a string (`\"5s\"`) or a fraction, `maxItems` as a string, `filter` as a bare query string: -32602",
		"accepted", "duration strings are easier to write; the filter shortcut saves a level",
		both(errCode(-32602), isResult)},
	{"extension-query", "`OR`, `NOT`, parentheses and `MATCHES`: -32603 with the parse error", "the query runs",
		"evtctl's filter language extends Tendermint's", both(errCode(-32603), isResult)},
	{"space-query", "a query of white space alone: -32603 `offset N: EOF`", "matches everything, as the empty query does",
		"white space says nothing more than the empty query", both(errCode(-32603), isResult)},
	{"want-6", "after a complete condition, a token other than AND: `got tag, want 6`", "`got tag, want AND operator`",
		"the node prints its token's number, which tells a reader nothing", func(tm, ev exchange) error {
			if !strings.Contains(tm.errData(), ", want 6") || strings.Replace(tm.errData(), "want 6", "want AND operator", 1) != ev.errData() {
				return fmt.Errorf("data %q and %q", tm.errData(), ev.errData())
			}
			return nil
		}},
	{"error-data", "the `data` of parse, method and param errors is Go's decoder text (`json: cannot unmarshal …`)",
		"a sentence naming the param and what it wants", "the code and message are the same; the data is for people",
		func(tm, ev exchange) error {
			if tm.errCode() == 0 || tm.errCode() != ev.errCode() || tm.errMessage() != ev.errMessage() || tm.errData() == ev.errData() {
				return fmt.Errorf("want the same code and message and other data: %s and %s", tm.body, ev.body)
			}
			return nil
		}},
	{"parse-error-id", "an error about a body that is not JSON has no `id` member", "`\"id\":null`, as JSON-RPC 2.0 asks",
		"clients written to the specification look for it", both(
			all(errCode(-32700), noID), all(errCode(-32700), nullID))},
	{"invalid-request", "JSON that is not a valid request object (not an object, a `jsonrpc` other than `\"2.0\"`, an id that is neither a string nor a whole number): -32700 without an id",
		"-32600 Invalid Request, with the id when it is valid", "JSON-RPC 2.0's code for a request that is JSON but not a valid call",
		both(all(errCode(-32700), noID), errCode(-32600))},
	{"empty-body", "an empty POST body: an HTML list of its methods", "-32700", "this node serves one method",
		both(isHTML, errCode(-32700))},
	{"batch-of-one", "a batch that gets one reply: that reply alone, not in an array", "an array of one",
		"JSON-RPC 2.0 answers a batch with an array", both(isResult, batchOf(1))},
	{"empty-batch", "`[]`: an empty body", "-32600 (JSON-RPC 2.0)", "JSON-RPC 2.0", both(isEmpty, errCode(-32600))},
	{"batch-element", "a batch with an element that is not a request object: one -32700 for the whole batch",
		"each element answered on its own, the bad one with -32600", "JSON-RPC 2.0", both(errCode(-32700), batchOf(2))},
	{"batch-cap", "any number of calls in a batch", "at most 16: -32600", "a batch of long-polls holds a connection for as long as its longest wait",
		both(batchOf(17), errCode(-32600))},
	{"page-cap", "at most 100 items a page", "at most `--page-max` (1000 unless set)", "a client catching up moves fewer, larger pages",
		func(tm, ev exchange) error {
			if tm.items() != 100 || string(tm.member("more")) != "true" || ev.items() <= 100 {
				return fmt.Errorf("%d items (more %s) and %d items", tm.items(), tm.member("more"), ev.items())
			}
			return nil
		}},
	{"order-asc", "`order` is ignored", "`\"order\":\"asc\"` pages oldest first; the reply says `\"order\":\"asc\"`",
		"a client walks a backlog forward in constant memory", func(tm, ev exchange) error {
			if tm.member("order") != nil || string(ev.member("order")) != `"asc"` {
				return fmt.Errorf("order %s and %s", tm.member("order"), ev.member("order"))
			}
			return nil
		}},
	{"short-wait", "waits under 1 s are raised to 1 s", "honoured (0 or less: `--wait-default`, 1 s unless set)",
		"a client that wants a quick answer gets one", func(tm, ev exchange) error {
			// Lower bounds only, which no load can break (a wait starts after its request is
			// sent, and its timer does not fire early): the Tendermint node waits the second
			// it raises the wait to, the evtctl node the 100ms asked for. That the evtctl
			// node's wait is that and no longer is TestLongPollTimesOut's, on a fake clock.
			if tm.took < 900*time.Millisecond || ev.took < 100*time.Millisecond {
				return fmt.Errorf("took %v and %v", tm.took, ev.took)
			}
			return both(isResult, isResult)(tm, ev)
		}},
	{"get-filter", "GET takes no filter: `filter=` is -32602 and `query=` is ignored", "`query=` (or `filter=`) is the filter",
		"GET is handy for a quick look", both(errCode(-32602), isResult)},
	{"get-empty", "GET `maxItems=` or `waitTime=` with no value: -32602", "the default", "an empty value says nothing",
		both(errCode(-32602), isResult)},
	{"get-hex", "a GET value written `0x…` is read as hex bytes", "taken as written", "no param of this method is binary",
		func(tm, ev exchange) error {
			if !strings.Contains(tm.errData(), `"zzz"`) || !strings.Contains(ev.errData(), `"0x7a7a7a"`) {
				return fmt.Errorf("data %q and %q", tm.errData(), ev.errData())
			}
			return nil
		}},
	{"post-events", "POST `/events`: the method, params from the form", "CloudEvents ingest", "the path is the node's ingest endpoint",
		func(tm, ev exchange) error {
			if !tm.hasResult() || ev.status < 400 {
				return fmt.Errorf("HTTP %d %s and HTTP %d %s", tm.status, tm.body, ev.status, ev.body)
			}
			return nil
		}},
	{"id-not-utf8", "a string id with bytes that are not UTF-8: echoed as they are, which makes the reply invalid JSON",
		"echoed with U+FFFD in place of each such byte", "JSON text is UTF-8 (RFC 8259); a decoder that takes the node's reply reads the same id from either",
		func(tm, ev exchange) error {
			if utf8.Valid(tm.body) || !utf8.Valid(ev.body) || ev.object()["id"] != "a\uFFFDb" {
				return fmt.Errorf("replies %q and %q", tm.body, ev.body)
			}
			return both(isResult, isResult)(tm, ev)
		}},
	{"query-size", "a query of any length", "at most 4096 bytes and 256 conditions: -32603 `offset 4096: the query is N bytes long; at most 4096 are taken`",
		"a query's cost grows with its size; a Tendermint node's subscriptions take at most 512 bytes",
		func(tm, ev exchange) error {
			if !strings.Contains(ev.errData(), "at most 4096 are taken") {
				return fmt.Errorf("data %q", ev.errData())
			}
			return both(isResult, errCode(-32603))(tm, ev)
		}},
	{"get-malformed", "a GET query string that does not parse (`%zz`, `;`): HTTP 400 with the text `invalid HTTP request: …`",
		"HTTP 400 with `{\"error\":\"malformed query string: …\"}`", "the node's HTTP-level refusals are JSON",
		func(tm, ev exchange) error {
			if tm.status != http.StatusBadRequest || ev.status != http.StatusBadRequest ||
				!bytes.HasPrefix(tm.body, []byte("invalid HTTP request: ")) || !bytes.HasPrefix(ev.body, []byte(`{"error":"malformed query string: `)) {
				return fmt.Errorf("HTTP %d %s and HTTP %d %s", tm.status, tm.body, ev.status, ev.body)
			}
			return nil
		}},
	{"cursor-forms", "a cursor in upper case or with fewer digits is read; other bad ones say why in Go's words",
		"only cursors as nodes write them: `invalid cursor \"…\": invalid cursor format`", "evtctl's cursors sort as strings",
		both(isResult, errCode(-32603))},
	{"max-results", "`max_results`, the ADR's name for `maxItems`, is ignored: the page has the default 10 items",
		"honoured, as `maxItems` is", "a client written from the ADR gets the page it asks for",
		func(tm, ev exchange) error {
			if tm.items() != 10 || ev.items() != 2 {
				return fmt.Errorf("%d items and %d items", tm.items(), ev.items())
			}
			return nil
		}},
	{"wait-time", "`wait_time`, the ADR's name for `waitTime`, is ignored (a string there is no error): the wait is the default 1 s",
		"honoured, as `waitTime` is", "a client written from the ADR gets the wait it asks for",
		func(tm, ev exchange) error {
			// Lower bounds only, as for short-wait: the evtctl node waits the 2s asked for,
			// twice its default; the Tendermint node answers, where it refuses a string
			// waitTime, so it did not read the member.
			if tm.took < 900*time.Millisecond || ev.took < 2*time.Second {
				return fmt.Errorf("took %v and %v", tm.took, ev.took)
			}
			return both(isResult, isResult)(tm, ev)
		}},
	{"cursor-order", "`before` and `after` compare cursors by their time part alone: an item whose time equals the bound's is outside the range, whatever the sequences",
		"by the whole cursor, time then sequence, as cursors sort", "a cursor names one item, and a range ends exactly there",
		func(tm, ev exchange) error {
			if tm.holdsBoundTime() || !ev.holdsBoundTime() {
				return fmt.Errorf("an item at the bound's time in the replies: %v and %v", tm.holdsBoundTime(), ev.holdsBoundTime())
			}
			return both(isResult, isResult)(tm, ev)
		}},
	{"other-methods", "its other methods (`status`, `health`, `block`, …) answer",
		"-32601 Method not found, naming the method it serves", "an evtctl node serves events, not a chain",
		func(tm, ev exchange) error {
			if _, ok := tm.object()["result"]; !ok {
				return fmt.Errorf("tendermint: want a result, got HTTP %d %s", tm.status, abbrev(tm.body))
			}
			if ev.errCode() != -32601 || !strings.Contains(ev.errData(), `serves "events"`) {
				return fmt.Errorf("evtctl: want -32601 naming events, got HTTP %d %s", ev.status, abbrev(ev.body))
			}
			return nil
		}},
	{"get-root", "`GET /`: an HTML page listing its RPC endpoints", "a plain-text list of the node's endpoints",
		"not all of them are JSON-RPC methods, and text reads in a terminal", both(all(isStatus(http.StatusOK), isHTML), isEndpointList)},
	{"put-root", "`PUT /`, `DELETE /` or any other method with a JSON-RPC body: the call is answered",
		"405 Method Not Allowed, `Allow: GET, HEAD, POST`", "JSON-RPC over HTTP is a POST",
		both(isResult, func(e exchange) error {
			if e.status != http.StatusMethodNotAllowed || e.header.Get("Allow") != "GET, HEAD, POST" {
				return fmt.Errorf("want 405 with Allow: GET, HEAD, POST, got HTTP %d %v %s", e.status, e.header, abbrev(e.body))
			}
			return nil
		})},
	{"get-root-body", "`GET /` with a JSON-RPC body: the call is answered", "the list of endpoints; the body is not read",
		"a GET's body has no meaning in HTTP (RFC 9110)", both(isResult, isEndpointList)},
}

// exchange is a reply as received.
type exchange struct {
	status int
	ctype  string
	header http.Header
	sent   string // the body of the request
	body   []byte
	v      any // the body decoded, numbers as json.Number; nil unless JSON
	took   time.Duration
}

func (e exchange) object() map[string]any { m, _ := e.v.(map[string]any); return m }

// errObj is the error object of a reply: the "error" member, or a bare GET error.
func (e exchange) errObj() map[string]any {
	m := e.object()
	if eo, ok := m["error"].(map[string]any); ok {
		return eo
	}
	if _, ok := m["code"]; ok {
		return m
	}
	return nil
}

func (e exchange) errCode() int {
	n, _ := e.errObj()["code"].(json.Number)
	i, _ := n.Int64()
	return int(i)
}

func (e exchange) errMessage() string { s, _ := e.errObj()["message"].(string); return s }
func (e exchange) errData() string    { s, _ := e.errObj()["data"].(string); return s }

func (e exchange) hasResult() bool {
	m := e.object()
	if r, ok := m["result"].(map[string]any); ok {
		m = r
	}
	_, ok := m["items"]
	return ok
}

// member is a member of the result, as JSON text; nil if absent.
func (e exchange) member(name string) []byte {
	m := e.object()
	if r, ok := m["result"].(map[string]any); ok {
		m = r
	}
	v, ok := m[name]
	if !ok {
		return nil
	}
	b, _ := json.Marshal(v)
	return b
}

// holdsBoundTime reports whether the result's items include one whose cursor has the time
// part of the before or after cursor the request named.
func (e exchange) holdsBoundTime() bool {
	var req struct {
		Params struct{ Before, After string }
	}
	json.Unmarshal([]byte(e.sent), &req)
	bound, _, _ := strings.Cut(req.Params.Before+req.Params.After, "-")
	m := e.object()
	if r, ok := m["result"].(map[string]any); ok {
		m = r
	}
	items, _ := m["items"].([]any)
	for _, it := range items {
		c, _ := it.(map[string]any)["cursor"].(string)
		if ts, _, _ := strings.Cut(c, "-"); bound != "" && ts == bound {
			return true
		}
	}
	return false
}

func (e exchange) items() int {
	m := e.object()
	if r, ok := m["result"].(map[string]any); ok {
		m = r
	}
	a, _ := m["items"].([]any)
	return len(a)
}

type expect func(exchange) error

func errCode(code int) expect {
	return func(e exchange) error {
		if e.errCode() != code {
			return fmt.Errorf("want error %d, got HTTP %d %s", code, e.status, abbrev(e.body))
		}
		return nil
	}
}

func isResult(e exchange) error {
	if !e.hasResult() {
		return fmt.Errorf("want a result, got HTTP %d %s", e.status, abbrev(e.body))
	}
	return nil
}

func isEmpty(e exchange) error {
	if e.status != http.StatusOK || len(e.body) != 0 {
		return fmt.Errorf("want HTTP 200 with no body, got HTTP %d %s", e.status, abbrev(e.body))
	}
	return nil
}

func isStatus(code int) expect {
	return func(e exchange) error {
		if e.status != code {
			return fmt.Errorf("want HTTP %d, got HTTP %d %s", code, e.status, abbrev(e.body))
		}
		return nil
	}
}

// isEndpointList is an evtctl node's answer to GET /: the list of its endpoints, as text.
func isEndpointList(e exchange) error {
	if e.status != http.StatusOK || !strings.HasPrefix(e.ctype, "text/plain") || !bytes.Contains(e.body, []byte("POST /events")) {
		return fmt.Errorf("want the list of endpoints, got HTTP %d %q %s", e.status, e.ctype, abbrev(e.body))
	}
	return nil
}

func isHTML(e exchange) error {
	if !strings.HasPrefix(e.ctype, "text/html") {
		return fmt.Errorf("want HTML, got %q %s", e.ctype, abbrev(e.body))
	}
	return nil
}

func noID(e exchange) error {
	if _, ok := e.object()["id"]; ok {
		return fmt.Errorf("want no id member: %s", e.body)
	}
	return nil
}

func nullID(e exchange) error {
	if id, ok := e.object()["id"]; !ok || id != nil {
		return fmt.Errorf("want \"id\":null: %s", e.body)
	}
	return nil
}

func batchOf(n int) expect {
	return func(e exchange) error {
		if a, ok := e.v.([]any); !ok || len(a) != n {
			return fmt.Errorf("want an array of %d replies: %s", n, abbrev(e.body))
		}
		return nil
	}
}

func all(es ...expect) expect {
	return func(e exchange) error {
		for _, x := range es {
			if err := x(e); err != nil {
				return err
			}
		}
		return nil
	}
}

// both checks the Tendermint node's reply with tm and evtctl's with ev.
func both(tm, ev expect) func(exchange, exchange) error {
	return func(t, e exchange) error {
		if err := tm(t); err != nil {
			return fmt.Errorf("tendermint: %w", err)
		}
		if err := ev(e); err != nil {
			return fmt.Errorf("evtctl: %w", err)
		}
		return nil
	}
}

// shape describes a reply for comparison: HTTP status, content type, and the JSON with the
// values that must be equal (jsonrpc, id, code, message, and data where exact) spelled out and
// the others by kind. Arrays of items are described by the kinds of their elements; an item's
// data is an event in each node's own format.
func (e exchange) shape(exactData bool) string {
	var body string
	switch {
	case len(e.body) == 0:
		body = "<empty>"
	case e.v == nil:
		body = "<not JSON>"
	default:
		body = shapeOf(e.v, "", exactData)
	}
	return fmt.Sprintf("HTTP %d %s %s", e.status, e.ctype, body)
}

func shapeOf(v any, path string, exactData bool) string {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			switch {
			case k == "id" || k == "jsonrpc" || k == "code" || k == "message" || k == "data" && exactData && !strings.HasSuffix(path, "items[]"):
				b, _ := json.Marshal(x[k])
				parts = append(parts, k+"="+string(b))
			case k == "data" && strings.HasSuffix(path, "items[]"):
				parts = append(parts, k+":"+kindOf(x[k]))
			default:
				parts = append(parts, k+":"+shapeOf(x[k], path+"."+k, exactData))
			}
		}
		return "{" + strings.Join(parts, ",") + "}"
	case []any:
		var parts []string
		for _, el := range x {
			if path == "" { // a batch: reply by reply
				parts = append(parts, shapeOf(el, "", exactData))
			} else if s := shapeOf(el, path+"[]", exactData); !slices.Contains(parts, s) {
				parts = append(parts, s)
			}
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return kindOf(v)
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

// diffCase is one request sent to both nodes.
type diffCase struct {
	name   string
	get    string // GET this path and query; else POST (or method)
	method string // the method of a request with a body, when it is not POST
	path   string // the POST path; "/" if empty
	// body is the POST body. {{newest}} is each node's newest cursor; {{nextTx}} and
	// {{prevTx}} are the cursor of its newest Tx item with the same time and the next or the
	// previous sequence number.
	body   string
	items  int    // > 0: both replies hold this many items
	differ string // the key of a deliberate difference; "" when the replies must match
}

// far is a cursor after anything either log holds: a call `before` it reads once, never waits.
const far = `"7fffffffffffffff-0000"`

func call(params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"events","params":` + params + `}`
}

var diffCases = []diffCase{
	// Pages.
	{name: "page", body: call(`{"maxItems":2,"before":` + far + `}`), items: 2},
	{name: "Tx page", body: call(`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":1,"before":` + far + `}`), items: 1},
	{name: "head", body: call(`{"maxItems":1}`), items: 1},
	{name: "maxItems 0", body: call(`{"maxItems":0,"before":` + far + `}`), items: 10},
	{name: "maxItems -1", body: call(`{"maxItems":-1,"before":` + far + `}`), items: 10},
	{name: "maxItems 1000", body: call(`{"maxItems":1000,"before":` + far + `}`), differ: "page-cap"},
	{name: "params null", body: call(`null`)},
	{name: "positional", body: call(`[{"query":"tm.event = 'Tx'"},1,"",` + far + `,null]`), items: 1},
	{name: "long-poll that times out", body: call(`{"filter":{"query":"tm.event = 'Tx'"},"after":"{{newest}}","waitTime":1000000000}`)},

	// The envelope.
	{name: "string id", body: `{"jsonrpc":"2.0","id":"a-1\"é","method":"events","params":{"maxItems":1}}`, items: 1},
	{name: "negative id", body: `{"jsonrpc":"2.0","id":-5,"method":"events","params":{"maxItems":1}}`, items: 1},
	{name: "id not UTF-8", body: "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"events\",\"params\":{\"maxItems\":1}}", differ: "id-not-utf8"},
	{name: "large id", body: `{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"events","params":{"maxItems":1}}`, items: 1},
	{name: "no jsonrpc", body: `{"id":2,"method":"events","params":{"maxItems":1}}`, items: 1},
	{name: "member names in capitals", body: `{"JSONRPC":"2.0","ID":3,"METHOD":"events","PARAMS":{"MAXITEMS":1}}`, items: 1},
	{name: "notification", body: `{"jsonrpc":"2.0","method":"events","params":{"maxItems":1}}`},
	{name: "null id", body: `{"jsonrpc":"2.0","id":null,"method":"events","params":{"maxItems":1}}`},
	{name: "notification of another method", body: `{"jsonrpc":"2.0","method":"nope"}`},
	{name: "id 1.5", body: `{"jsonrpc":"2.0","id":1.5,"method":"events"}`, differ: "invalid-request"},
	{name: "id object", body: `{"jsonrpc":"2.0","id":{"a":1},"method":"events"}`, differ: "invalid-request"},
	{name: "jsonrpc 1.0", body: `{"jsonrpc":"1.0","id":1,"method":"events"}`, differ: "invalid-request"},
	{name: "bad JSON", body: `{"jsonrpc":"2.0","id":1,"method":"events"`, differ: "parse-error-id"},
	{name: "not JSON", body: `hello`, differ: "parse-error-id"},
	{name: "not an object", body: `5`, differ: "invalid-request"},
	{name: "empty body", body: ``, differ: "empty-body"},
	{name: "unknown method", body: `{"jsonrpc":"2.0","id":1,"method":"nope"}`, differ: "error-data"},
	{name: "method in capitals", body: `{"jsonrpc":"2.0","id":1,"method":"Events","params":{}}`, differ: "error-data"},

	// Batches.
	{name: "batch", body: `[` + call(`{"maxItems":1}`) + `,{"jsonrpc":"2.0","method":"events"},` +
		`{"jsonrpc":"2.0","id":"b","method":"events","params":{"after":"zzz"}}]`},
	{name: "batch of notifications", body: `[{"jsonrpc":"2.0","method":"events"},{"jsonrpc":"2.0","id":null,"method":"events"}]`},
	{name: "batch of one", body: `[` + call(`{"maxItems":1}`) + `]`, differ: "batch-of-one"},
	{name: "empty batch", body: `[]`, differ: "empty-batch"},
	{name: "batch with a number", body: `[` + call(`{"maxItems":1}`) + `,5]`, differ: "batch-element"},
	{name: "batch of 17", body: `[` + strings.TrimSuffix(strings.Repeat(call(`{"maxItems":1,"before":`+far+`}`)+",", 17), ",") + `]`, differ: "batch-cap"},

	// Params.
	{name: "maxitems", body: call(`{"maxitems":1,"before":` + far + `}`), items: 1},
	{name: "MAXITEMS", body: call(`{"MAXITEMS":1,"BEFORE":` + far + `}`), items: 1},
	{name: "the last of two wins", body: call(`{"maxItems":1,"maxitems":2,"before":` + far + `}`), items: 2},
	{name: "the last of two wins, other way", body: call(`{"maxitems":2,"maxItems":1,"before":` + far + `}`), items: 1},
	{name: "FILTER", body: call(`{"Filter":{"QUERY":"tm.event = 'Tx'"},"maxItems":5,"before":` + far + `}`)},
	{name: "unknown param", body: call(`{"maxItems":1,"sideways":true}`), items: 1},
	{name: "negative waitTime", body: call(`{"maxItems":1,"waitTime":-1}`), items: 1},
	{name: "huge waitTime", body: call(`{"maxItems":1,"waitTime":99999999999999}`), items: 1},
	{name: "params absent", body: `{"jsonrpc":"2.0","id":1,"method":"events"}`, differ: "params-optional"},
	{name: "params a string", body: call(`"all"`), differ: "error-data"},
	{name: "no positional params", body: call(`[]`), differ: "positional-short"},
	{name: "two positional params", body: call(`[null,1]`), differ: "positional-short"},
	{name: "six positional params", body: call(`[null,1,"","",0,1]`), differ: "error-data"},
	{name: "string waitTime", body: call(`{"waitTime":"5s","maxItems":1}`), differ: "lenient-types"},
	{name: "fraction waitTime", body: call(`{"waitTime":1.5,"maxItems":1}`), differ: "lenient-types"},
	{name: "string maxItems", body: call(`{"maxItems":"1"}`), differ: "lenient-types"},
	{name: "bare filter", body: call(`{"filter":"tm.event = 'Tx'","maxItems":1}`), differ: "lenient-types"},
	{name: "maxItems abc", body: call(`{"maxItems":"abc"}`), differ: "error-data"},
	{name: "maxItems fraction", body: call(`{"maxItems":2.5}`), differ: "error-data"},
	{name: "waitTime true", body: call(`{"waitTime":true}`), differ: "error-data"},
	{name: "after a number", body: call(`{"after":5}`), differ: "error-data"},
	{name: "filter a number", body: call(`{"filter":7}`), differ: "error-data"},
	{name: "query a number", body: call(`{"filter":{"query":7}}`), differ: "error-data"},
	{name: "order asc", body: call(`{"order":"asc","maxItems":1,"before":` + far + `}`), items: 1, differ: "order-asc"},
	{name: "short wait", body: call(`{"filter":{"query":"tm.event = 'Tx'"},"after":"{{newest}}","waitTime":100000000}`), differ: "short-wait"},

	// Cursors.
	{name: "bad cursor", body: call(`{"after":"zzz"}`)},
	{name: "bad before", body: call(`{"before":"nonsense"}`)},
	{name: "cursor in capitals", body: call(`{"after":"18EAC38C6F814A3A-001D","maxItems":1}`), differ: "cursor-forms"},
	{name: "short cursor", body: call(`{"after":"1-1","maxItems":1}`), differ: "cursor-forms"},

	// Queries (the whole corpus is checked against the node in pkg/filter).
	{name: "query tm.event = Tx", body: call(`{"filter":{"query":"tm.event = Tx"}}`)},
	{name: "query tm.event", body: call(`{"filter":{"query":"tm.event"}}`)},
	{name: "query unterminated", body: call(`{"filter":{"query":"a = 'x"}}`)},
	{name: "query (", body: call(`{"filter":{"query":"(a EXISTS) AND b EXISTS"}}`), differ: "extension-query"},
	{name: "query OR", body: call(`{"filter":{"query":"tm.event = 'Tx' OR tm.event = 'NewBlock'"},"maxItems":1}`), differ: "extension-query"},
	{name: "query a != 'x'", body: call(`{"filter":{"query":"a != 'x'"}}`)},
	{name: "query DATE", body: call(`{"filter":{"query":"a > DATE 0013-01-01"}}`)},
	{name: "query TIME", body: call(`{"filter":{"query":"a > TIME 2013-05-03T14:45:00"}}`)},
	{name: "query 'abc'", body: call(`{"filter":{"query":"'abc'"}}`)},
	{name: "query a = 1.2.3", body: call(`{"filter":{"query":"a = 1.2.3"}}`), differ: "want-6"},
	{name: "query of 5000 bytes", body: call(`{"filter":{"query":"a = '` + strings.Repeat("x", 4994) + `'"},"maxItems":1,"before":` + far + `}`), differ: "query-size"},
	{name: "query of spaces", body: call(`{"filter":{"query":"   "},"maxItems":1}`), differ: "space-query"},
	{name: "empty query", body: call(`{"filter":{"query":""},"maxItems":1}`), items: 1},

	// GET.
	{name: "GET page", get: "/events?maxItems=1&before=" + far, items: 1},
	{name: "GET head", get: "/events?maxItems=1", items: 1},
	{name: "GET bad cursor", get: "/events?after=zzz"},
	{name: "GET quoted bad cursor", get: `/events?before="zzz"`},
	{name: "GET negative waitTime", get: "/events?maxItems=1&waitTime=-5", items: 1},
	{name: "GET maxitems", get: "/events?maxitems=1&before=" + far, items: 10},
	{name: "GET maxItems abc", get: "/events?maxItems=abc", differ: "error-data"},
	{name: "GET string waitTime", get: "/events?maxItems=1&waitTime=5s", differ: "lenient-types"},
	{name: "GET filter", get: "/events?maxItems=1&filter=tm.event%3D%27Tx%27", differ: "get-filter"},
	{name: "GET empty maxItems", get: "/events?maxItems=&before=" + far, differ: "get-empty"},
	{name: "GET hex cursor", get: "/events?after=0x7a7a7a", differ: "get-hex"},
	{name: "POST /events", path: "/events", body: "maxItems=1", differ: "post-events"},
	{name: "GET after=%zz", get: "/events?maxItems=1&after=%zz", differ: "get-malformed"},
	{name: "GET semicolon", get: "/events?maxItems=1;after=x", differ: "get-malformed"},

	// The ADR's names of params.
	{name: "max_results", body: call(`{"max_results":2,"before":` + far + `}`), differ: "max-results"},
	{name: "wait_time", body: call(`{"filter":{"query":"tm.event = 'Tx'"},"after":"{{newest}}","wait_time":"2s"}`), differ: "wait-time"},

	// Cursors as bounds: the newest Tx item's time with a sequence number beside its own.
	{name: "before the next sequence", body: call(`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":1,"before":"{{nextTx}}"}`), differ: "cursor-order"},
	{name: "after the previous sequence", body: call(`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":1,"after":"{{prevTx}}","waitTime":1000000000}`), differ: "cursor-order"},

	// Other methods and other HTTP methods.
	{name: "method health", body: `{"jsonrpc":"2.0","id":1,"method":"health"}`, differ: "other-methods"},
	{name: "method status", body: `{"jsonrpc":"2.0","id":1,"method":"status","params":{}}`, differ: "other-methods"},
	{name: "GET /", get: "/", differ: "get-root"},
	{name: "PUT /", method: http.MethodPut, body: call(`{"maxItems":1}`), differ: "put-root"},
	{name: "DELETE /", method: http.MethodDelete, body: call(`{"maxItems":1}`), differ: "put-root"},
	{name: "GET / with a call", method: http.MethodGet, body: call(`{"maxItems":1}`), differ: "get-root-body"},
}

// exactDataCodes are the codes whose data must match to the byte when the replies must match:
// bad cursors and bad queries.
var exactDataCodes = []int{-32603}

// TestAgainstTendermint sends the same requests, good and bad, to a real Tendermint node and
// to an evtctl node, and compares the replies: HTTP status, content type, the envelope (id
// echoed), result members and their kinds, error code and message, and error data for bad
// cursors and queries. Where a reply differs on purpose, the difference must be the one
// deliberateDifferences describes.
func TestAgainstTendermint(t *testing.T) {
	tm := tmnode.Start(t, "create-empty-blocks=false", "event-log-max-items=400")
	// An evtctl node with the defaults of `evtctl serve`.
	ev := newNode(t, server.Config{DefaultItems: 10, MaxItems: 1000, DefaultWait: time.Second, MaxWait: 30 * time.Second}, eventlog.Options{})
	// More than a page of the largest size a Tendermint node gives, with Tx items among them.
	for i := range 110 {
		if err := tm.Broadcast(fmt.Sprintf("diff%d=%d", i, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tm.Commit("diff=done"); err != nil {
		t.Fatal(err)
	}
	var events []string
	for i := range 120 {
		typ := "NewBlock"
		if i%6 == 0 {
			typ = "Tx"
		}
		events = append(events, ceJSON("/diff", fmt.Sprint(i), typ, i))
	}
	ev.ingestBatch(events)
	vars := map[string]*strings.Replacer{tm.URL: cursorVars(t, tm.URL), ev.ts.URL: cursorVars(t, ev.ts.URL)}

	differences := map[string]func(exchange, exchange) error{}
	for _, d := range deliberateDifferences {
		differences[d.key] = d.check
	}
	used := map[string]bool{}
	for _, c := range diffCases {
		if c.differ != "" {
			if differences[c.differ] == nil {
				t.Fatalf("%s: no deliberate difference %q", c.name, c.differ)
			}
			used[c.differ] = true
		}
	}
	for _, d := range deliberateDifferences {
		if !used[d.key] {
			t.Errorf("the deliberate difference %q is not shown by any case", d.key)
		}
	}

	for _, c := range diffCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var tr, er exchange
			var wg sync.WaitGroup
			wg.Go(func() { tr = send(t, tm.URL, c, vars[tm.URL]) })
			wg.Go(func() { er = send(t, ev.ts.URL, c, vars[ev.ts.URL]) })
			wg.Wait()
			if c.differ != "" {
				if err := differences[c.differ](tr, er); err != nil {
					t.Errorf("deliberate difference %q: %v\ntendermint: %s\nevtctl:     %s", c.differ, err, abbrev(tr.body), abbrev(er.body))
				}
				return
			}
			exact := slices.Contains(exactDataCodes, tr.errCode())
			if ts, es := tr.shape(exact), er.shape(exact); ts != es {
				t.Errorf("replies differ\ntendermint: %s\nevtctl:     %s", ts, es)
			}
			if c.items > 0 && (tr.items() != c.items || er.items() != c.items) {
				t.Errorf("items: tendermint %d, evtctl %d, want %d", tr.items(), er.items(), c.items)
			}
		})
	}
}

func newestCursor(t *testing.T, base string) string {
	t.Helper()
	e := send(t, base, diffCase{get: "/events?maxItems=1&before=" + far}, nil)
	var s string
	if err := json.Unmarshal(e.member("newest"), &s); err != nil || s == "" {
		t.Fatalf("%s: no newest cursor in %s", base, e.body)
	}
	return s
}

// cursorVars are the cursors a case's body names, for the node at base (see diffCase.body).
func cursorVars(t *testing.T, base string) *strings.Replacer {
	t.Helper()
	tx := send(t, base, diffCase{body: call(`{"filter":{"query":"tm.event = 'Tx'"},"maxItems":1,"before":` + far + `}`)}, nil)
	items, _ := tx.object()["result"].(map[string]any)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("%s: no Tx item in %s", base, tx.body)
	}
	newestTx, _ := items[0].(map[string]any)["cursor"].(string)
	return strings.NewReplacer("{{newest}}", newestCursor(t, base),
		"{{nextTx}}", nextCursor(t, newestTx, 1), "{{prevTx}}", nextCursor(t, newestTx, -1))
}

// nextCursor is c with its sequence number moved by d, in as many digits: the same time.
func nextCursor(t *testing.T, c string, d int64) string {
	ts, seq, ok := strings.Cut(c, "-")
	n, err := strconv.ParseUint(seq, 16, 64)
	if !ok || err != nil {
		t.Fatalf("cursor %q", c)
	}
	return fmt.Sprintf("%s-%0*x", ts, len(seq), uint64(int64(n)+d))
}

func send(t *testing.T, base string, c diffCase, vars *strings.Replacer) exchange {
	method, target, body := http.MethodGet, c.get, ""
	if c.get == "" {
		method, target = cmp.Or(c.method, http.MethodPost), cmp.Or(c.path, "/")
		body = c.body
		if vars != nil {
			body = vars.Replace(body)
		}
	}
	req, err := http.NewRequest(method, base+target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if c.path == "/events" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, base+target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, base+target, err)
	}
	e := exchange{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), header: resp.Header, sent: body, body: bytes.TrimSpace(b), took: time.Since(start)}
	d := json.NewDecoder(bytes.NewReader(e.body))
	d.UseNumber()
	if d.Decode(&e.v) != nil {
		e.v = nil
	}
	return e
}

// TestDifferencesInDocs checks that the manual's Tendermint page (docs/tendermint.md) lists
// the deliberate differences as the table above has them.
func TestDifferencesInDocs(t *testing.T) {
	page, err := os.ReadFile("../../docs/tendermint.md")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	want.WriteString("| | Tendermint node | evtctl node | why |\n|---|---|---|---|\n")
	for _, d := range deliberateDifferences {
		fmt.Fprintf(&want, "| `%s` | %s | %s | %s |\n", d.key, d.tendermint, d.evtctl, d.why)
	}
	if !bytes.Contains(page, []byte(want.String())) {
		t.Fatalf("docs/tendermint.md should hold the table of deliberate differences as it is here:\n%s", want.String())
	}
}
