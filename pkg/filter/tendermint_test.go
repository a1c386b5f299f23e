package filter

import (
	"errors"
	"strings"
	"testing"
	"unicode"
)

const (
	extOr      = "OR is an evtctl extension; a Tendermint node accepts only conditions joined by AND"
	extNot     = "NOT is an evtctl extension; a Tendermint node accepts only conditions joined by AND"
	extParen   = "parentheses are an evtctl extension; a Tendermint node accepts only conditions joined by AND"
	extMatches = "MATCHES is an evtctl extension; a Tendermint node's operators are =, <, <=, >, >=, CONTAINS and EXISTS"
	extSpace   = "a query of only white space is an error on a Tendermint node (evtctl takes it to match everything); send an empty query to match everything"
)

// checkCases pairs queries with what CheckTendermint says of them ("" for nothing).
var checkCases = []struct{ src, want string }{
	// What a Tendermint node accepts.
	{``, ``},
	{`tm.event = 'Tx'`, ``},
	{`tm.event = 'Tx' AND app.key = 'k'`, ``},
	{`a = 5.`, ``},
	{`a = 'x' 'junk`, ``}, // a Tendermint node stops at an unterminated string after a complete query
	{`NOT EXISTS`, ``},
	{`OR = 'x' AND MATCHES CONTAINS 'y'`, ``},
	{`tx.date >= DATE 2013-05-03 AND tx.time < TIME 2013-05-03T14:45:00Z`, ``},

	// White space alone.
	{` `, `offset 0: ` + extSpace},
	{"\t\n\u00a0", `offset 0: ` + extSpace},

	// evtctl's additions, at the first byte a Tendermint node refuses.
	{`a EXISTS OR b EXISTS`, `offset 9: ` + extOr},
	{`NOT a EXISTS`, `offset 0: ` + extNot},
	{`a EXISTS AND NOT b EXISTS`, `offset 13: ` + extNot},
	{`(a EXISTS)`, `offset 0: ` + extParen},
	{`a EXISTS AND (b EXISTS OR c EXISTS)`, `offset 13: ` + extParen},
	{`type MATCHES 'org.#'`, `offset 5: ` + extMatches},
	{`NOT MATCHES 'a.*'`, `offset 4: ` + extMatches},
	{`MATCHES MATCHES 'a.*'`, `offset 8: ` + extMatches},
	{`a = 5)`, `offset 5: ` + extParen},
	{`a = (`, `offset 4: ` + extParen},
	// ... also when the query is wrong for evtctl as well.
	{`a EXISTS OR`, `offset 9: ` + extOr},
	{`NOT`, `offset 0: ` + extNot},
	{`x MATCHES`, `offset 2: ` + extMatches},
	{`type MATCHES 'a*'`, `offset 5: ` + extMatches},
	// ... but not after the point where a Tendermint node has stopped.
	{`a = Tx OR b EXISTS`, `offset 4: got tag, wanted number, timestamp, datestamp or string`},
	{`a EXISTS AND 'x' OR b EXISTS`, `offset 13: got string, wanted tag`},

	// The rest: what a Tendermint node says, to the byte.
	{`tm.event`, `offset 8: EOF`},
	{`a = 'x`, `offset 4: EOF`},
	{`a = 1.2.3`, `offset 7: got tag, want AND operator`},
	{`a = 'x' &`, `offset 8: got invalid token, want AND operator`},
	{`tm.event = Tx`, `offset 11: got tag, wanted number, timestamp, datestamp or string`},
	{`a != 'x'`, `offset 2: invalid input ! at offset 3`},
	{`OR a EXISTS`, `offset 3: got tag, wanted <= operator, >= operator, < operator, > operator, = operator, CONTAINS operator or EXISTS operator`},
	{`tx.date >= DATE 0013-01-03`, `offset 11: datestamp year 13 out of range`},
}

func TestCheckTendermint(t *testing.T) {
	for _, tc := range checkCases {
		err := CheckTendermint(tc.src)
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckTendermint(%q) = %v, want nil", tc.src, err)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("CheckTendermint(%q) = %#v, want *SyntaxError %q", tc.src, err, tc.want)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("CheckTendermint(%q):\n got %s\nwant %s", tc.src, err, tc.want)
		}
	}
}

// conditionsJoinedByAnd reports whether x is a condition or an AND of conditions (or the
// empty query): what a query in Tendermint's language means. (Its canonical text cannot
// tell, as " OR " may stand in a string.)
func conditionsJoinedByAnd(x *expr) bool {
	switch {
	case x == nil || x.kind == exprCond:
		return true
	case x.kind != exprAnd:
		return false
	}
	for _, t := range x.terms {
		if t.kind != exprCond {
			return false
		}
	}
	return true
}

// limitError reports whether err is Compile's refusal of a query longer or larger than it
// takes (see MaxQueryBytes, MaxConditions).
func limitError(err error) bool {
	var se *SyntaxError
	return errors.As(err, &se) && (strings.HasSuffix(se.Msg, "are taken") || strings.HasSuffix(se.Msg, "conditions in one query"))
}

// isSpace reports whether src is white space alone, as the scanner reads it.
func isSpace(src string) bool { return strings.TrimFunc(src, unicode.IsSpace) == "" }

// FuzzCheckTendermint checks CheckTendermint against the model of Tendermint's parser, and
// that model against evtctl's: a query in Tendermint's language compiles, and where evtctl's
// additions are not in use the two parsers agree on acceptance and on the message.
func FuzzCheckTendermint(f *testing.F) {
	for _, tc := range checkCases {
		f.Add(tc.src)
	}
	for _, tc := range validQueries {
		f.Add(tc.src)
	}
	for _, tc := range badQueries {
		addSeed(f, tc.src)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tmErr := tendermintParse(src)
		checkErr := CheckTendermint(src)
		q, err := Compile(src)
		ext := extension(src)
		switch {
		case tmErr == nil:
			// A Tendermint node accepts it: so does evtctl, reading AND-joined conditions.
			if checkErr != nil {
				t.Fatalf("%q: a Tendermint node accepts it, CheckTendermint says %v", src, checkErr)
			}
			if limitError(err) {
				return // longer or larger than evtctl takes
			}
			if err != nil {
				t.Fatalf("%q: a Tendermint node accepts it, Compile says %v", src, err)
			}
			if ext != nil {
				t.Fatalf("%q: a Tendermint node accepts it, yet it uses an extension: %v", src, ext)
			}
			if !conditionsJoinedByAnd(q.root) {
				t.Fatalf("%q: a Tendermint node accepts it; evtctl reads %s", src, q.canonical())
			}
			return
		}
		var se *SyntaxError
		if !errors.As(checkErr, &se) || se.Offset < 0 || se.Offset > len(src) || se.Msg == "" {
			t.Fatalf("%q: a Tendermint node refuses it (%v); CheckTendermint says %#v", src, tmErr, checkErr)
		}
		switch {
		case isSpace(src):
			if !limitError(err) && (err != nil || !q.MatchesAll()) {
				t.Fatalf("%q: white space should match everything here: %v", src, err)
			}
		case ext != nil:
			if checkErr.Error() != ext.Error() {
				t.Fatalf("%q: CheckTendermint says %v, want the extension %v", src, checkErr, ext)
			}
			if ext.Offset > tmErr.Offset {
				t.Fatalf("%q: the extension (%v) is after the point where Tendermint stops (%v)", src, ext, tmErr)
			}
		default:
			// No extension in use: evtctl refuses it too, in Tendermint's words.
			if checkErr.Error() != tmErr.Error() {
				t.Fatalf("%q: CheckTendermint says %v, Tendermint %v", src, checkErr, tmErr)
			}
			if !limitError(err) && (err == nil || err.Error() != tmErr.Error()) {
				t.Fatalf("%q: Compile says %v, Tendermint %v", src, err, tmErr)
			}
		}
	})
}
