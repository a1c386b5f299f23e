package filter

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// OEP-41 CloudEvents in structured mode.
const (
	// The example of the evtctl docs.
	enrollEvent = `{"specversion":"1.0","id":"a1","source":"openedx/lms/web","type":"org.openedx.learning.course.enrollment.created.v1","time":"2026-11-22T10:00:00Z","datacontenttype":"application/json","minorversion":0,"pii":false,"data":{"user":{"id":42,"name":"ann"},"tags":["a","b"],"price":"12.50"}}`

	// Pretty-printed, with a subject and a time whose UTC date is the day before its local date.
	catalogEvent = `
	{
	  "specversion": "1.0",
	  "id": "c7",
	  "source": "openedx/cms/web",
	  "type": "org.openedx.content_authoring.course.catalog_info.changed.v1",
	  "subject": "course-v1:edX+DemoX+2026",
	  "time": "2026-11-22T01:30:00+02:00",
	  "datacontenttype": "application/json",
	  "minorversion": 1,
	  "data": {
	    "catalog_info": {
	      "course_key": "course-v1:edX+DemoX+2026",
	      "name": "Demonstration Course",
	      "schedule_data": {"start": "2026-12-01T00:00:00Z", "pacing": "instructor"},
	      "hidden": false
	    }
	  }
	}`

	// Mixed arrays, nulls, escapes, odd keys, a dotted extension name, fractional seconds.
	purchaseEvent = `{"specversion":"1.0","id":"p9","source":"openedx/ecommerce","type":"seat.purchased.v1",` +
		`"time":"2026-11-23T23:59:59.999Z","ext.with.dots":"yes","data":{` +
		`"amounts":[5,-3,1e3,"7stake",true],"empty":[],"nulls":[null],"nil":null,"nested":[[1,2],{"k":1}],` +
		`"caf":"caf\u00e9 \"au lait\"","a.b":"dotted","":{"x":"under an empty key"},` +
		`"items":[{"sku":"A1","qty":2},{"sku":"B2","qty":0}],"flag":true,"day":"2026-11-23"}}`
)

var matchJSONCases = []struct {
	query string
	event string
	want  bool
}{
	// Context attributes and extensions.
	{`type = 'org.openedx.learning.course.enrollment.created.v1'`, enrollEvent, true},
	{`type = 'org.openedx'`, enrollEvent, false},
	{`type CONTAINS 'enrollment'`, enrollEvent, true},
	{`type CONTAINS 'unenrollment'`, enrollEvent, false},
	{`id = 'a1' AND source = 'openedx/lms/web' AND specversion = '1.0'`, enrollEvent, true},
	{`datacontenttype = 'application/json'`, enrollEvent, true},
	{`subject EXISTS`, enrollEvent, false},
	{`NOT subject EXISTS`, enrollEvent, true},
	{`subject = 'course-v1:edX+DemoX+2026'`, catalogEvent, true},
	{`minorversion = 0`, enrollEvent, true},
	{`minorversion > 0`, catalogEvent, true},
	{`pii = 'false'`, enrollEvent, true},
	{`pii = 0`, enrollEvent, false},
	{`pii EXISTS`, enrollEvent, true},
	{`ext.with.dots = 'yes'`, purchaseEvent, true},
	{`ext EXISTS`, purchaseEvent, false},

	// tm.event is the type.
	{`tm.event = 'org.openedx.learning.course.enrollment.created.v1'`, enrollEvent, true},
	{`tm.event = 'Tx'`, enrollEvent, false},
	{`tm.event MATCHES 'org.openedx.#'`, enrollEvent, true},
	{`tm EXISTS`, enrollEvent, false},

	// Paths into data.
	{`data.user.id = 42`, enrollEvent, true},
	{`data.user.id = '42'`, enrollEvent, true},
	{`data.user.id > 41.5 AND data.user.id <= 42`, enrollEvent, true},
	{`data.user.id >= 43`, enrollEvent, false},
	{`data.user.name = 'ann'`, enrollEvent, true},
	{`data.user.name = 'Ann'`, enrollEvent, false},
	{`data.user.name CONTAINS 'n'`, enrollEvent, true},
	{`data.user.name > 5`, enrollEvent, false},
	{`data.user.name < TIME 2030-01-01T00:00:00Z`, enrollEvent, false},
	{`data.catalog_info.schedule_data.pacing = 'instructor'`, catalogEvent, true},
	{`data.catalog_info.hidden = 'false'`, catalogEvent, true},
	{`data.missing EXISTS`, enrollEvent, false},
	{`data.user.id.more EXISTS`, enrollEvent, false},
	{`data EXISTS`, enrollEvent, true},
	{`data.items.1.sku = 'B2'`, purchaseEvent, true},
	{`data.items.0.qty > 1`, purchaseEvent, true},
	{`data.items.sku EXISTS`, purchaseEvent, false},
	{`data.a.b EXISTS`, purchaseEvent, false}, // a path, not the key "a.b"
	{`data..x = 'under an empty key'`, purchaseEvent, true},
	{`data.caf = 'café "au lait"'`, purchaseEvent, true},
	{`data.flag = 'true' AND data.flag CONTAINS 'ru'`, purchaseEvent, true},
	{`data.flag = 1`, purchaseEvent, false},

	// Strings read as numbers the way Tendermint reads attribute values.
	{`data.price > 12.4`, enrollEvent, true},
	{`data.price = 12.5`, enrollEvent, true},
	{`data.price = '12.50'`, enrollEvent, true},
	{`data.price = '12.5'`, enrollEvent, false},
	{`data.price CONTAINS '.5'`, enrollEvent, true},

	// Objects exist but equal nothing.
	{`data.user EXISTS`, enrollEvent, true},
	{`data.user = 'ann'`, enrollEvent, false},
	{`data.user CONTAINS 'ann'`, enrollEvent, false},
	{`NOT data.user CONTAINS 'ann'`, enrollEvent, true},

	// Arrays: any element may satisfy a condition.
	{`data.tags = 'b'`, enrollEvent, true},
	{`data.tags = 'c'`, enrollEvent, false},
	{`data.tags = 'a' AND data.tags = 'b'`, enrollEvent, true},
	{`NOT data.tags = 'a'`, enrollEvent, false},
	{`data.tags.0 = 'a'`, enrollEvent, true},
	{`data.tags.1 = 'a'`, enrollEvent, false},
	{`data.tags.2 EXISTS`, enrollEvent, false},
	{`data.amounts = 5`, purchaseEvent, true},
	{`data.amounts < 0`, purchaseEvent, true}, // -3, a JSON number
	{`data.amounts = 1000`, purchaseEvent, true},
	{`data.amounts = 7`, purchaseEvent, true}, // "7stake"
	{`data.amounts > 2000`, purchaseEvent, false},
	{`data.amounts = 'true'`, purchaseEvent, true},
	{`data.empty EXISTS`, purchaseEvent, false},
	{`data.nulls EXISTS`, purchaseEvent, false},
	{`data.nil EXISTS`, purchaseEvent, false},
	{`NOT data.nil EXISTS`, purchaseEvent, true},
	{`data.nested EXISTS`, purchaseEvent, true},
	{`data.nested = 1`, purchaseEvent, false},
	{`data.nested.0.1 = 2`, purchaseEvent, true},

	// TIME compares instants.
	{`time = TIME 2026-11-22T10:00:00Z`, enrollEvent, true},
	{`time = TIME 2026-11-22T11:00:00+01:00`, enrollEvent, true},
	{`time > TIME 2026-11-22T10:00:00Z`, enrollEvent, false},
	{`time >= TIME 2026-11-22T10:00:00Z`, enrollEvent, true},
	{`time < TIME 2026-11-22T10:00:01Z`, enrollEvent, true},
	{`time <= TIME 2026-11-22T09:59:59Z`, enrollEvent, false},
	{`time < TIME 2026-11-22T00:00:00Z`, catalogEvent, true},
	{`time = TIME 2026-11-21T23:30:00Z`, catalogEvent, true},
	{`time = TIME 2026-11-23T23:59:59Z`, purchaseEvent, false},
	{`time > TIME 2026-11-23T23:59:59Z`, purchaseEvent, true},
	{`time < TIME 2026-11-24T00:00:00Z`, purchaseEvent, true},
	{`data.day = TIME 2026-11-23T00:00:00Z`, purchaseEvent, false}, // a date is no timestamp

	// DATE compares UTC days.
	{`time = DATE 2026-11-22`, enrollEvent, true},
	{`time < DATE 2026-11-22`, enrollEvent, false},
	{`time <= DATE 2026-11-22`, enrollEvent, true},
	{`time > DATE 2026-11-21`, enrollEvent, true},
	{`time >= DATE 2026-11-23`, enrollEvent, false},
	{`time = DATE 2026-11-21`, catalogEvent, true},
	{`time = DATE 2026-11-22`, catalogEvent, false},
	{`time <= DATE 2026-11-23 AND time >= DATE 2026-11-23`, purchaseEvent, true},
	{`time < DATE 2026-11-24`, purchaseEvent, true},
	{`data.day = DATE 2026-11-23`, purchaseEvent, true},
	{`data.day > DATE 2026-11-22`, purchaseEvent, true},
	{`data.user.name = DATE 2026-11-22`, enrollEvent, false},

	// MATCHES.
	{`type MATCHES 'org.openedx.#'`, enrollEvent, true},
	{`type MATCHES 'org.#'`, enrollEvent, true},
	{`type MATCHES '#'`, enrollEvent, true},
	{`type MATCHES 'org.openedx.learning.*'`, enrollEvent, false},
	{`type MATCHES 'org.openedx.learning.course.enrollment.*.v1'`, enrollEvent, true},
	{`type MATCHES '#.v1'`, enrollEvent, true},
	{`type MATCHES '*.v1'`, enrollEvent, false},
	{`type MATCHES 'org.#.created.#'`, enrollEvent, true},
	{`type MATCHES 'org.#.deleted.#'`, enrollEvent, false},
	{`type MATCHES 'org.openedx.content_authoring.course.*.changed.v1'`, catalogEvent, true},
	{`type MATCHES '*.purchased.#'`, purchaseEvent, true},
	{`type MATCHES '*.purchased.#'`, enrollEvent, false},
	{`type MATCHES 'seat.purchased.v1.#'`, purchaseEvent, true},
	{`type MATCHES 'seat.purchased'`, purchaseEvent, false},
	{`source MATCHES 'openedx/lms/web'`, enrollEvent, true},
	{`data.tags MATCHES '*'`, enrollEvent, true},
	{`subject MATCHES '#'`, enrollEvent, false},

	// OR, NOT and parentheses.
	{`type CONTAINS 'unenroll' OR data.user.id = 42`, enrollEvent, true},
	{`type CONTAINS 'unenroll' OR data.user.id = 43`, enrollEvent, false},
	{`data.user.id = 42 OR data.user.id = 1 AND data.tags = 'z'`, enrollEvent, true},
	{`(data.user.id = 42 OR data.user.id = 1) AND data.tags = 'z'`, enrollEvent, false},
	{`NOT (data.user.id = 42 AND data.tags = 'a')`, enrollEvent, false},
	{`NOT NOT data.tags = 'a'`, enrollEvent, true},
	{`(type CONTAINS 'x' OR data.tags = 'b') AND NOT subject EXISTS`, enrollEvent, true},

	// Tags that several conditions test: each condition sees the tag's values.
	{`data.amounts = 5 AND data.amounts = 1000 AND NOT data.amounts = 4`, purchaseEvent, true},
	{`data.amounts = 4 OR data.amounts = 6 OR data.amounts > 2000`, purchaseEvent, false},
	{`type = 'x' OR type CONTAINS 'seat' OR tm.event MATCHES 'seat.#'`, purchaseEvent, true},
	{`type = 'x' OR NOT (tm.event MATCHES '#.v1' AND type EXISTS)`, purchaseEvent, false},
	{`(subject = 'a' OR subject = 'b') AND subject EXISTS OR NOT subject EXISTS`, enrollEvent, true},
	{`data.tags = 'a' AND data.tags = 'b' AND data.tags.0 = 'a' AND NOT data.tags.1 = 'a'`, enrollEvent, true},

	// Input that is not a JSON object has no attributes.
	{`type EXISTS`, `[{"type":"x"}]`, false},
	{`NOT type EXISTS`, `[]`, true},
	{`type EXISTS`, `"type"`, false},
	{`type EXISTS`, `x{"type":"x"}`, false},
	{`type EXISTS`, `5 {"type":"x"}`, false},
	{`type EXISTS`, ``, false},
	{`type EXISTS`, " \n\t{\"type\":\"x\"}", true},
	{``, `not json at all`, true},
}

// Queries whose tags are each tested by several conditions, more than a match keeps on its
// stack and more than one word of its bitmap holds, match as each condition alone would.
func TestRepeatedTags(t *testing.T) {
	for _, tags := range []int{1, 3, 4, 5, 64, 65, 100} {
		var terms []string
		for k := range tags {
			terms = append(terms, fmt.Sprintf("(t%d = 'v%d' AND t%d EXISTS)", k, k, k))
		}
		q := mustCompile(t, strings.Join(terms, " OR "))
		if q.slots != tags {
			t.Fatalf("%d tags tested twice each: %d slots", tags, q.slots)
		}
		for k := range tags {
			for _, c := range []struct {
				value string
				want  bool
			}{{fmt.Sprintf("v%d", k), true}, {"w", false}} {
				event := fmt.Sprintf(`{"t%d":%q}`, k, c.value)
				if got := q.MatchJSON([]byte(event)); got != c.want {
					t.Fatalf("%d tags: %s: got %v, want %v", tags, event, got, c.want)
				}
			}
		}
	}
}

// A tag that many conditions test is looked up in an event once, not once for each: an OR of
// 200 conditions on a tag the event lacks (the lookup reads the whole event) makes one lookup,
// as one condition does. Each tag is looked up once, however many conditions test it.
func TestRepeatedTagReadOnce(t *testing.T) {
	var terms []string
	for k := range 200 {
		terms = append(terms, fmt.Sprintf("subject = 'x%d'", k))
	}
	event := []byte(`{"specversion":"1.0","id":"1","source":"/s","type":"t","data":{"pad":"` +
		strings.Repeat("x", 60<<10) + `"}}`)
	for _, c := range []struct {
		query   string
		lookups int
	}{
		{strings.Join(terms, " OR "), 1},
		{"subject = 'x' OR (subject EXISTS AND NOT subject CONTAINS 'y') OR subject > 5", 1},
		{"subject = 'x' OR data.pad = 'y' OR subject = 'z' OR data.pad CONTAINS 'w'", 2},
		{"subject = 'x' OR data.pad = 'y' OR type = 'z'", 3},
	} {
		q := mustCompile(t, c.query)
		ok, lookups := q.matchJSONCounted(event)
		if ok {
			t.Fatalf("%.60s: the event matches", c.query)
		}
		if lookups != c.lookups {
			t.Errorf("%.60s: %d lookups in the event, want %d", c.query, lookups, c.lookups)
		}
	}
}

func TestMatchJSON(t *testing.T) {
	for _, tc := range matchJSONCases {
		q, err := Compile(tc.query)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.query, err)
			continue
		}
		if got := q.MatchJSON([]byte(tc.event)); got != tc.want {
			t.Errorf("%q on %.60s…: got %v, want %v", tc.query, tc.event, got, tc.want)
		}
	}
}

// tags is a Tendermint event's attributes flattened into tags, each with its values.
type tags map[string][]string

// event returns t as a JSON object with a member for each tag (its name dots and all) whose
// value is the array of the tag's values as strings; "tm.event" becomes "type".
func (t tags) event() []byte {
	m := make(map[string][]string, len(t))
	for tag, values := range t {
		if tag == "tm.event" {
			tag = "type"
		}
		if values == nil {
			values = []string{}
		}
		m[tag] = values
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// Cases from Tendermint's query tests, with its events flattened into tags whose values are
// text, as a Tendermint node holds them.
var matchCases = []struct {
	query string
	attrs tags
	want  bool
}{
	{`tm.events.type='NewBlock'`, tags{"tm.events.type": {"NewBlock"}}, true},
	{`tx.gas > 7`, tags{"tx.gas": {"8"}}, true},
	{`transfer.amount > 7`, tags{"transfer.amount": {"8stake"}}, true},
	{`transfer.amount > 7`, tags{"transfer.amount": {"8.045"}}, true},
	{`transfer.amount > 7.043`, tags{"transfer.amount": {"8.045stake"}}, true},
	{`transfer.amount > 8.045`, tags{"transfer.amount": {"8.045stake"}}, false},
	{`tx.gas > 7 AND tx.gas < 9`, tags{"tx.gas": {"8"}}, true},
	{`body.weight >= 3.5`, tags{"body.weight": {"3.5"}}, true},
	{`account.balance < 1000.0`, tags{"account.balance": {"900"}}, true},
	{`apples.kg <= 4`, tags{"apples.kg": {"4.0"}}, true},
	{`oranges.kg < 4 AND watermellons.kg > 10`, tags{"oranges.kg": {"3"}, "watermellons.kg": {"12"}}, true},
	{`peaches.kg < 4`, tags{"peaches.kg": {"5"}}, false},
	{`tx.date > DATE 2017-01-01`, tags{"tx.date": {"2026-11-22"}}, true},
	{`tx.date = DATE 2017-01-01`, tags{"tx.date": {"2017-01-01"}}, true},
	{`tx.date = DATE 2018-01-01`, tags{"tx.date": {"2017-01-01"}}, false},
	{`tx.time >= TIME 2013-05-03T14:45:00Z`, tags{"tx.time": {"2026-11-22T10:00:00Z"}}, true},
	{`tx.time = TIME 2013-05-03T14:45:00Z`, tags{"tx.time": {"2018-05-03T14:45:00Z"}}, false},
	{`abci.owner.name CONTAINS 'Igor'`, tags{"abci.owner.name": {"Igor", "Ivan"}}, true},
	{`abci.owner.name CONTAINS 'Igor'`, tags{"abci.owner.name": {"Pavel", "Ivan"}}, false},
	{`abci.owner.name = 'Ivan' AND abci.owner.name = 'Igor'`, tags{"abci.owner.name": {"Igor", "Ivan"}}, true},
	{`abci.owner.name = 'Ivan' AND abci.owner.name = 'John'`, tags{"abci.owner.name": {"Igor", "Ivan"}}, false},
	{`slash EXISTS`, tags{"slash": {""}, "slash.reason": {"missing_signature"}}, true},
	{`slash EXISTS`, tags{"slash.reason": {"missing_signature"}}, false},
	{`slash.reason EXISTS AND slash.power > 1000`, tags{"slash.reason": {"x"}, "slash.power": {"6000"}}, true},
	{`slash.reason EXISTS AND slash.power > 1000`, tags{"slash.reason": {"x"}, "slash.power": {"500"}}, false},
	{`tm.event = 'Tx' AND rewards.withdraw.address = 'AddrA' AND rewards.withdraw.source = 'SrcY'`,
		tags{"tm.event": {"Tx"}, "rewards.withdraw.address": {"AddrA", "AddrB"}, "rewards.withdraw.source": {"SrcX", "SrcY"}}, true},

	// Text values read as numbers: a leading unsigned decimal, as in Tendermint.
	{`x < 0`, tags{"x": {"-3"}}, false},
	{`x = 1`, tags{"x": {"1e3"}}, true},
	{`x = 5`, tags{"x": {"5."}}, true},
	{`x = 0.5`, tags{"x": {".5"}}, false},
	{`x > 1`, tags{"x": {"999999999999999999999999999999"}}, true},
	{`x > 1`, tags{"x": {"1" + strings.Repeat("0", 400)}}, false}, // out of range
	// A number operand too large for a float64 matches nothing.
	{`x < 1` + strings.Repeat("0", 400), tags{"x": {"5"}}, false},
	{`NOT x < 1` + strings.Repeat("0", 400), tags{"x": {"5"}}, true},

	// An empty value is a value.
	{`x EXISTS`, tags{"x": {""}}, true},
	{`x = ''`, tags{"x": {""}}, true},
	{`x CONTAINS ''`, tags{"x": {""}}, true},
	{`x EXISTS`, tags{"x": {}}, false},
	{`NOT x EXISTS`, nil, true},

	// Keywords read as tags.
	{`NOT EXISTS`, tags{"NOT": {"1"}}, true},
	{`NOT NOT EXISTS`, tags{"NOT": {"1"}}, false},
	{`OR = 'x' AND MATCHES MATCHES 'a.*'`, tags{"OR": {"x"}, "MATCHES": {"a.b"}}, true},

	// Dates reduce timestamps to their UTC day.
	{`t = DATE 2026-11-21`, tags{"t": {"2026-11-22T01:30:00+02:00"}}, true},
	{`t < DATE 2026-11-22`, tags{"t": {"2026-11-22T01:30:00+02:00"}}, true},
	{`t = DATE 2026-11-21`, tags{"t": {"20261121"}}, false},
}

func TestMatchTags(t *testing.T) {
	for _, tc := range matchCases {
		q, err := Compile(tc.query)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.query, err)
			continue
		}
		if got := q.MatchJSON(tc.attrs.event()); got != tc.want {
			t.Errorf("%q on %s: got %v, want %v", tc.query, tc.attrs.event(), got, tc.want)
		}
	}
}

func TestJSONPath(t *testing.T) {
	for tag, want := range map[string]string{
		"tm.event":      "type",
		"type":          "type",
		"ext.with.dots": `ext\.with\.dots`,
		"data":          "data",
		"data.user.id":  "data.user.id",
		"data.tags.0":   "data.tags.0",
		"data..x":       "data..x",
		// Tags cannot hold these, but the path must take them literally if they ever do.
		"data.a*b.c?":   `data.a\*b.c\?`,
		"data.#.@x|y!z": `data.\#.\@x\|y\!z`,
		"@this":         `\@this`,
	} {
		if got := jsonPath(tag); got != want {
			t.Errorf("jsonPath(%q) = %q, want %q", tag, got, want)
		}
	}
}

func TestMatchesAll(t *testing.T) {
	for _, q := range []*Query{nil, mustCompile(t, ""), mustCompile(t, "  \n")} {
		if !q.MatchesAll() || !q.MatchJSON(nil) || !q.MatchJSON([]byte("[")) {
			t.Errorf("%q does not match everything", q.source())
		}
	}
	if q := mustCompile(t, "a EXISTS OR NOT a EXISTS"); q.MatchesAll() {
		t.Errorf("%q: MatchesAll is true", q.source())
	}
}

func TestConcurrentMatch(t *testing.T) {
	q := mustCompile(t, `type MATCHES 'org.#' AND data.tags = 'b' AND time = DATE 2026-11-22`)
	event := []byte(enrollEvent)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if !q.MatchJSON(event) {
					t.Error("no match")
					return
				}
			}
		})
	}
	wg.Wait()
}

func mustCompile(t testing.TB, src string) *Query {
	t.Helper()
	q, err := Compile(src)
	if err != nil {
		t.Fatalf("Compile(%q): %v", src, err)
	}
	return q
}
