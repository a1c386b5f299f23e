// Package filter compiles and evaluates event queries, a superset of Tendermint's filter language.
package filter

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"
)

// Query is a compiled query. It is immutable and safe for concurrent use.
// A nil *Query matches everything.
type Query struct {
	src   string
	root  *expr // nil for the empty query
	slots int   // values a match keeps, one per tag that several conditions test
	work  int   // see Work
}

// Compile parses a query once; the result is immutable and safe for concurrent use.
// An empty or all-whitespace query compiles to a Query that matches everything (a Tendermint
// node refuses one of white space alone: see CheckTendermint).
//
// The language is Tendermint's (tag = 'text' | number | TIME t | DATE d; tag < <= > >= with a
// number, TIME or DATE; tag CONTAINS 'text'; tag EXISTS; conditions joined by AND) with OR,
// NOT, parentheses and tag MATCHES 'pattern' added. Every query a Tendermint node accepts
// compiles and means the same here, except that DATE also compares timestamps by their UTC
// day where Tendermint matches only dates. Errors are *SyntaxError: for a query that uses none
// of the additions before the point of the error, the error a Tendermint node gives for it.
//
// A query is at most MaxQueryBytes long, has at most MaxConditions conditions and nests at most
// MaxDepth deep; a longer or larger one is a *SyntaxError at the point where it goes past the
// limit.
func Compile(src string) (*Query, error) {
	if len(src) > MaxQueryBytes {
		return nil, &SyntaxError{Offset: MaxQueryBytes,
			Msg: fmt.Sprintf("the query is %d bytes long; at most %d are taken", len(src), MaxQueryBytes)}
	}
	root, err := parse(src)
	if err != nil {
		return nil, err
	}
	q := &Query{src: src, root: root}
	if root != nil {
		q.assignSlots()
		q.work = q.slots
		q.root.walk(func(c *condition) {
			q.work++ // the test of a value, which for an array reads the array
			if c.slot < 0 {
				q.work++ // the lookup of a tag no other condition tests
			}
			if c.op == tokMatches {
				q.work += 5 // a pattern reads its text word by word
			}
		})
	}
	return q, nil
}

// Work is about how much a match of q costs for each byte of an event, counted in passes
// over the event's bytes: a tag's lookup reads the event up to the tag (all of it when the
// tag is absent), the test of a value may read the value, and MATCHES reads its text word by
// word, which costs about five passes. Budgets of filtering work divide by it; the empty
// query's work is 0.
func (q *Query) Work() int {
	if q == nil {
		return 0
	}
	return q.work
}

// assignSlots gives each tag that several conditions test a slot, so that a match looks its
// value up once however many conditions test it. (A query has at most MaxConditions
// conditions: comparing each with those before it costs little, once.)
func (q *Query) assignSlots() {
	conds := make([]*condition, 0, 16)
	q.root.walk(func(c *condition) { conds = append(conds, c) })
	for i, c := range conds {
		for _, first := range conds[:i] {
			if first.path == c.path {
				if first.slot < 0 {
					first.slot = q.slots
					q.slots++
				}
				c.slot = first.slot
				break
			}
		}
	}
}

// SyntaxError is the error of Compile and CheckTendermint. For a query in Tendermint's
// language its Error text is a Tendermint node's, e.g. "offset 8: EOF" or "offset 11: got tag,
// wanted number, timestamp, datestamp or string", except that where the node prints a token's
// number ("got tag, want 6") it names the token ("want AND operator").
type SyntaxError struct {
	Offset int    // 0-based byte offset into the query text
	Msg    string // what was found and what was wanted there
}

// Error returns "offset N: MSG".
func (e *SyntaxError) Error() string {
	return "offset " + strconv.Itoa(e.Offset) + ": " + e.Msg
}

// MatchesAll reports whether q is the empty query.
func (q *Query) MatchesAll() bool { return q == nil || q.root == nil }

// MatchJSON reports whether a CloudEvent in JSON format (structured mode, a single JSON object)
// matches. A tag names a top-level member (a context attribute or an extension), "tm.event"
// is "type", and "data.a.b" is a path into data in which a number may index an array. An
// array stands for its elements and null for no value; a JSON number compares by its value,
// true and false as those words. Input that is not a JSON object has no attributes.
// MatchJSON neither validates nor retains event.
func (q *Query) MatchJSON(event []byte) bool {
	ok, _ := q.matchJSONCounted(event)
	return ok
}

// matchJSONCounted is MatchJSON, and also counts the lookups of a tag in the event it makes,
// each of which may read the whole event: one for each tag it needs, however many conditions
// test it.
func (q *Query) matchJSONCounted(event []byte) (ok bool, lookups int) {
	if q.MatchesAll() {
		return true, 0
	}
	// The string shares event's memory; no result derived from it outlives this call.
	doc := unsafe.String(unsafe.SliceData(event), len(event))
	if !isObject(doc) {
		doc = ""
	}
	var v jsonEnv
	switch {
	case q.slots == 0:
	case q.slots <= 4:
		var values [4]gjson.Result
		var found [1]uint64
		v.values, v.found = values[:q.slots], found[:]
	default:
		v.values, v.found = make([]gjson.Result, q.slots), make([]uint64, (q.slots+63)/64)
	}
	ok = q.root.matchJSON(doc, &v)
	return ok, v.lookups
}

// isObject reports whether doc, after leading JSON whitespace, starts a JSON object.
func isObject(doc string) bool {
	s := strings.TrimLeft(doc, " \t\r\n")
	return s != "" && s[0] == '{'
}
