package filter

import (
	"errors"
	"strings"
	"testing"
)

// validQueries pairs queries with their fully parenthesized form.
var validQueries = []struct{ src, want string }{
	// The empty query.
	{"", ""},
	{" \t\n\u00a0", ""},

	// The facts file.
	{`tm.event = 'Tx' AND app.key = 'k'`, `(tm.event = 'Tx' AND app.key = 'k')`},
	{`tm.event = 'Tx'`, `tm.event = 'Tx'`},
	{`tx.height >= 100`, `tx.height >= 100`},

	// Tendermint's syntax and match tests.
	{`tm.events.type='NewBlock'`, `tm.events.type = 'NewBlock'`},
	{`tm.events.type = 'NewBlock'`, `tm.events.type = 'NewBlock'`},
	{`tm.events.name = ''`, `tm.events.name = ''`},
	{`tm.events.type='TIME'`, `tm.events.type = 'TIME'`},
	{`tm.events.type='DATE'`, `tm.events.type = 'DATE'`},
	{`tm.events.type='='`, `tm.events.type = '='`},
	{`tm.events.type='NewBlock' AND abci.account.name='Igor'`, `(tm.events.type = 'NewBlock' AND abci.account.name = 'Igor')`},
	{`abci.account.name CONTAINS 'Igor'`, `abci.account.name CONTAINS 'Igor'`},
	{`abci.owner.name CONTAINS 'Igor'`, `abci.owner.name CONTAINS 'Igor'`},
	{`tx.date > DATE 2013-05-03`, `tx.date > DATE 2013-05-03`},
	{`tx.date < DATE 2013-05-03`, `tx.date < DATE 2013-05-03`},
	{`tx.date <= DATE 2013-05-03`, `tx.date <= DATE 2013-05-03`},
	{`tx.date >= DATE 2013-05-03`, `tx.date >= DATE 2013-05-03`},
	{`tx.date > TIME 2013-05-03T14:45:00+07:00`, `tx.date > TIME 2013-05-03T14:45:00+07:00`},
	{`tx.date < TIME 2013-05-03T14:45:00-02:00`, `tx.date < TIME 2013-05-03T14:45:00-02:00`},
	{`tx.date <= TIME 2013-05-03T14:45:00Z`, `tx.date <= TIME 2013-05-03T14:45:00Z`},
	{`tx.time >= TIME 2013-05-03T14:45:00Z`, `tx.time >= TIME 2013-05-03T14:45:00Z`},
	{`account.balance=100`, `account.balance = 100`},
	{`account.balance >= 200`, `account.balance >= 200`},
	{`account.balance >= 100.5`, `account.balance >= 100.5`},
	{`account.balance < 1000.0`, `account.balance < 1000.0`},
	{`tx.gas > 7 AND tx.gas < 9`, `(tx.gas > 7 AND tx.gas < 9)`},
	{`slashing.amount EXISTS`, `slashing.amount EXISTS`},
	{`slashing.amount EXISTS AND account.balance=100`, `(slashing.amount EXISTS AND account.balance = 100)`},
	{`slashing EXISTS`, `slashing EXISTS`},
	{`hash='136E18F7E4C348B780CF873A0BF43922E5BAFA63'`, `hash = '136E18F7E4C348B780CF873A0BF43922E5BAFA63'`},

	// Lexical corners, read as Tendermint reads them.
	{`a = 5.`, `a = 5.`},
	{"\ta\u00a0=\n'x y'  ", `a = 'x y'`},
	{`a=5AND b>=6`, `(a = 5 AND b >= 6)`},
	{`é.b EXISTS AND _x EXISTS AND .y. EXISTS`, `(é.b EXISTS AND _x EXISTS AND .y. EXISTS)`},
	{`TIME=5`, "TIME\t= 5"},
	{"DATE\tEXISTS", "DATE\tEXISTS"},
	{`and EXISTS`, `and EXISTS`},
	{`a = 'NOT' AND b = 'AND OR'`, `(a = 'NOT' AND b = 'AND OR')`},
	// Tendermint ignores an unterminated string after a complete query.
	{`a = 'x' 'junk`, `a = 'x'`},

	// OR, NOT and parentheses.
	{`a EXISTS OR b EXISTS`, `(a EXISTS OR b EXISTS)`},
	{`a EXISTS OR b EXISTS AND c EXISTS`, `(a EXISTS OR (b EXISTS AND c EXISTS))`},
	{`a EXISTS AND b EXISTS OR c EXISTS`, `((a EXISTS AND b EXISTS) OR c EXISTS)`},
	{`(a EXISTS OR b EXISTS) AND c EXISTS`, `((a EXISTS OR b EXISTS) AND c EXISTS)`},
	{`NOT a EXISTS AND b EXISTS`, `(NOT a EXISTS AND b EXISTS)`},
	{`NOT (a EXISTS AND b EXISTS)`, `NOT (a EXISTS AND b EXISTS)`},
	{`NOT NOT a EXISTS`, `NOT NOT a EXISTS`},
	{`((a = 1))`, `a = 1`},
	{`(a EXISTS AND b EXISTS) AND (c EXISTS AND d EXISTS)`, `(a EXISTS AND b EXISTS AND c EXISTS AND d EXISTS)`},
	{`a EXISTS OR (b EXISTS OR c EXISTS)`, `(a EXISTS OR b EXISTS OR c EXISTS)`},
	{`NOT(a=1)OR(b=2)`, `(NOT a = 1 OR b = 2)`},

	// MATCHES.
	{`type MATCHES 'org.openedx.catalog.course.*'`, `type MATCHES 'org.openedx.catalog.course.*'`},
	{`type MATCHES '*.purchased.#'`, `type MATCHES '*.purchased.#'`},
	{`type MATCHES 'org.#'`, `type MATCHES 'org.#'`},
	{`type MATCHES '#'`, `type MATCHES '#'`},
	{`x MATCHES 'a..b' AND y MATCHES '.'`, `(x MATCHES 'a..b' AND y MATCHES '.')`},

	// OR, NOT and MATCHES are tags to Tendermint; followed by an operator, they still are.
	{`NOT EXISTS`, `NOT EXISTS`},
	{`NOT NOT EXISTS`, `NOT NOT EXISTS`},
	{`NOT < 5`, `NOT < 5`},
	{`OR = 'x' OR MATCHES MATCHES 'a.*'`, `(OR = 'x' OR MATCHES MATCHES 'a.*')`},

	// Nesting up to the limit.
	{strings.Repeat("(", MaxDepth) + "a EXISTS" + strings.Repeat(")", MaxDepth), "a EXISTS"},
	{strings.Repeat("NOT ", 2) + "a EXISTS", "NOT NOT a EXISTS"},
}

func TestCompile(t *testing.T) {
	for _, tc := range validQueries {
		q, err := Compile(tc.src)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.src, err)
			continue
		}
		if got := q.canonical(); got != tc.want {
			t.Errorf("Compile(%q) = %s, want %s", tc.src, got, tc.want)
		}
		if q.source() != tc.src {
			t.Errorf("Compile(%q).String() = %q", tc.src, q.source())
		}
		if got, want := q.MatchesAll(), tc.want == ""; got != want {
			t.Errorf("Compile(%q).MatchesAll() = %v, want %v", tc.src, got, want)
		}
	}
}

const (
	wantOperand  = "wanted number, timestamp, datestamp or string"
	wantOrdered  = "wanted number, timestamp or datestamp"
	wantOperator = "wanted <= operator, >= operator, < operator, > operator, = operator, CONTAINS operator, EXISTS operator or MATCHES operator"
	wantTerm     = "wanted tag, NOT operator or left parenthesis"
	wantMore     = "wanted AND operator, OR operator or end of input"
	wantClose    = "wanted AND operator, OR operator or right parenthesis"

	// Tendermint's own words, where evtctl's additions are not in use.
	tmOperator = "wanted <= operator, >= operator, < operator, > operator, = operator, CONTAINS operator or EXISTS operator"
	tmMore     = "want AND operator" // Tendermint prints its token number here: "want 6"
)

// badQueries pairs queries with their error text.
var badQueries = []struct{ src, want string }{
	// What a Tendermint node says, to the byte.
	{`tm.event = Tx`, `offset 11: got tag, ` + wantOperand},
	{`tm.events.type=NewBlock`, `offset 15: got tag, ` + wantOperand},
	{`tm.events.type==`, `offset 15: got = operator, ` + wantOperand},
	{`tm.events.type>'NewBlock'`, `offset 15: got string, ` + wantOrdered},
	{`tx.date >= DAT 2013-05-03`, `offset 11: got tag, ` + wantOrdered},
	{`tx.date <= DATE2013-05-03`, `offset 11: got tag, ` + wantOrdered},
	{`tx.date >= TIME2013-05-03T14:45:00Z`, `offset 11: got tag, ` + wantOrdered},
	{`tx.date = IME 2013-05-03T14:45:00Z`, `offset 10: got tag, ` + wantOperand},
	{`account.balance >>= 400`, `offset 17: got >= operator, ` + wantOrdered},
	{`a CONTAINS 5`, `offset 11: got number, wanted string`},
	{`a CONTAINS TIME 2013-05-03T14:45:00Z`, `offset 11: got timestamp, wanted string`},

	// Bad TIME and DATE literals, in Tendermint's words, at the keyword.
	{`tx.date <= DATE -05-03`, `offset 11: invalid DATE value: parsing time "-05-03" as "2006-01-02": cannot parse "-05-03" as "2006"`},
	{`tx.date >= DATE 20130503`, `offset 11: invalid DATE value: parsing time "20130503" as "2006-01-02": cannot parse "0503" as "-"`},
	{`tx.date >= DATE 2013+01-03`, `offset 11: invalid DATE value: parsing time "2013" as "2006-01-02": cannot parse "" as "-"`},
	{`tx.date >= DATE 0013-01-03`, `offset 11: datestamp year 13 out of range`},
	{`tx.date >= DATE 2013-31-03`, `offset 11: invalid DATE value: parsing time "2013-31-03": month out of range`},
	{`tx.date >= DATE 2013-01-83`, `offset 11: invalid DATE value: parsing time "2013-01-83": day out of range`},
	{`tx.date = TIME 2013-05-:45:00Z`, `offset 10: invalid TIME value: parsing time "2013-05-:45:00Z" as "2006-01-02T15:04:05Z07:00": cannot parse ":45:00Z" as "02"`},
	{`tx.date >= TIME 2013-05-03T14:45:00`, `offset 11: invalid TIME value: parsing time "2013-05-03T14:45:00" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "Z07:00"`},
	{`tx.date >= TIME 0013-00-00T14:45:00Z`, `offset 11: invalid TIME value: parsing time "0013-00-00T14:45:00Z": month out of range`},
	{`tx.date >= TIME 3000-01-01T00:00:00Z`, `offset 11: timestamp year 3000 out of range`},
	{`tx.date >= TIME 2013+05=03T14:45:00Z`, `offset 11: invalid TIME value: parsing time "2013+05" as "2006-01-02T15:04:05Z07:00": cannot parse "+05" as "-"`},
	{`a = TIME  2013-05-03T14:45:00Z`, `offset 4: invalid TIME value: parsing time "" as "2006-01-02T15:04:05Z07:00": cannot parse "" as "2006"`},
	{`DATE EXISTS`, `offset 0: invalid DATE value: parsing time "" as "2006-01-02": cannot parse "" as "2006"`},
	{`a = TIME`, `offset 4: got tag, ` + wantOperand},
	{"a = DATE\t2013-05-03", `offset 4: got tag, ` + wantOperand},
	{`x EXISTS OR a = TIME`, `offset 16: got tag, ` + wantOperand + ` (TIME must be followed by one space and its value)`},
	{"NOT a = DATE\t2013-05-03", `offset 8: got tag, ` + wantOperand + ` (DATE must be followed by one space and its value)`},

	// Unterminated strings, at the opening quote.
	{`tm.events.type='TIME`, `offset 15: EOF`},
	{`a CONTAINS 'x`, `offset 11: EOF`},
	{`'abc`, `offset 0: EOF`},
	{`a 'x`, `offset 2: EOF`},
	{`a = 'x`, `offset 4: EOF`},
	{`a EXISTS AND 'x`, `offset 13: EOF`},
	{`a = 5 OR b = 'x`, `offset 13: unterminated string, wanted closing quote`},

	// Missing pieces: Tendermint says only "EOF" here.
	{`tm.events.type=`, `offset 15: EOF`},
	{`a CONTAINS `, `offset 11: EOF`},
	{`a <`, `offset 3: EOF`},
	{`NewBlock`, `offset 8: EOF`},
	{`tm.event`, `offset 8: EOF`},
	{`tm.events.type='NewBlock' AND`, `offset 29: EOF`},
	{`a EXISTS OR `, `offset 12: got end of input, ` + wantTerm},
	{`NOT`, `offset 3: got end of input, ` + wantTerm},

	// Misplaced tokens.
	{`>==`, `offset 0: got >= operator, wanted tag`},
	{`='NewBlock'`, `offset 0: got = operator, wanted tag`},
	{`'NewBlock'`, `offset 0: got string, wanted tag`},
	{`AND tm.events.type='NewBlock' `, `offset 0: got AND operator, wanted tag`},
	{`OR a EXISTS`, `offset 3: got tag, ` + tmOperator},
	{`x = 1 AND AND`, `offset 10: got AND operator, wanted tag`},
	{`TIME 2013-05-03T14:45:00Z = 5`, `offset 0: got timestamp, wanted tag`},
	{`tm.events.type 'NewBlock' =`, `offset 15: got string, ` + tmOperator},
	{`tm.events.type'NewBlock'`, `offset 14: got string, ` + tmOperator},
	{`a AND b EXISTS`, `offset 2: got AND operator, ` + tmOperator},
	{`a NOT EXISTS`, `offset 2: got tag, ` + tmOperator},
	{`a < 'x'`, `offset 4: got string, ` + wantOrdered},
	{`a MATCHES 5`, `offset 10: got number, wanted string`},

	// Trailing garbage (Tendermint: "got tag, want 6", printing its AND token's number).
	{`tm.events.type='NewBlock' AN`, `offset 26: got tag, ` + tmMore},
	{`account.balance=33.22.1`, `offset 21: got tag, ` + tmMore},
	{`a = 1.2.3`, `offset 7: got tag, ` + tmMore},
	{`hash=136E18F7E4C348B780CF873A0BF43922E5BAFA63`, `offset 8: got tag, ` + tmMore},
	{`a EXISTS 5`, `offset 9: got number, ` + tmMore},
	{`a EXISTS TIME 2013-05-03T14:45:00`, `offset 9: got invalid token, ` + tmMore},
	{`a = 'x' 'y'`, `offset 8: got string, ` + tmMore},
	{`a = 5 NOT`, `offset 6: got tag, ` + tmMore},
	{`a = 'x' (b EXISTS)`, `offset 8: got left parenthesis, ` + wantMore},

	// Parentheses.
	{`(a EXISTS`, `offset 9: got end of input, ` + wantClose},
	{`((a EXISTS)`, `offset 11: got end of input, ` + wantClose},
	{`(a EXISTS b EXISTS)`, `offset 10: got tag, ` + wantClose},
	{`a = 5 AND b = 6)`, `offset 15: unmatched right parenthesis`},
	{`(a EXISTS))`, `offset 10: unmatched right parenthesis`},
	{`()`, `offset 1: got right parenthesis, ` + wantTerm},
	{`)`, `offset 0: got right parenthesis, ` + wantTerm},
	{`NOT )`, `offset 4: got right parenthesis, ` + wantTerm},

	// Characters that start no token.
	{`account.balance >= -300`, `offset 19: invalid input - at offset 20`},
	{`&`, `offset 0: invalid input & at offset 1`},
	{`a = 'x' &`, `offset 8: got invalid token, ` + tmMore},
	{`a != 'x'`, `offset 2: invalid input ! at offset 3`},
	{`a = "x"`, `offset 4: invalid input " at offset 5`},
	{"a = \xff", "offset 4: invalid input \uFFFD at offset 5"},
	{"a = 'é' AND b ≠ 'x'", `offset 15: invalid input ≠ at offset 18`},

	// Keywords are upper case. In Tendermint's language the message is Tendermint's; where
	// evtctl's additions are in use, a hint says so.
	{`a EXISTS and b EXISTS`, `offset 9: got tag, ` + tmMore},
	{`a EXISTS or b EXISTS`, `offset 9: got tag, ` + tmMore},
	{`a contains 'x'`, `offset 2: got tag, ` + tmOperator},
	{`not a EXISTS`, `offset 4: got tag, ` + tmOperator},
	{`t > time 2013-05-03T14:45:00Z`, `offset 4: got tag, ` + wantOrdered},
	{`x EXISTS OR y EXISTS and b EXISTS`, `offset 21: got tag, ` + wantMore + ` (keywords are upper case: did you mean AND?)`},
	{`NOT x EXISTS or b EXISTS`, `offset 13: got tag, ` + wantMore + ` (keywords are upper case: did you mean OR?)`},
	{`(x EXISTS) AND a contains 'x'`, `offset 17: got tag, ` + wantOperator + ` (keywords are upper case: did you mean CONTAINS?)`},
	{`(a Exists)`, `offset 3: got tag, ` + wantOperator + ` (keywords are upper case: did you mean EXISTS?)`},
	{`x EXISTS OR type matches 'a.*'`, `offset 17: got tag, ` + wantOperator + ` (keywords are upper case: did you mean MATCHES?)`},
	{`(not a EXISTS)`, `offset 5: got tag, ` + wantOperator + ` (keywords are upper case: did you mean NOT?)`},
	{`NOT t > time 2013-05-03T14:45:00Z`, `offset 8: got tag, ` + wantOrdered + ` (keywords are upper case: did you mean TIME?)`},
	{`NOT t = date 2013-05-03`, `offset 8: got tag, ` + wantOperand + ` (keywords are upper case: did you mean DATE?)`},

	// MATCHES patterns.
	{`type MATCHES ''`, `offset 13: empty pattern, wanted words separated by dots`},
	{`type MATCHES 'org.open*'`, `offset 22: wildcard * inside a word, wanted it alone between dots`},
	{`x MATCHES 'a.#b'`, `offset 13: wildcard # inside a word, wanted it alone between dots`},
	{`x MATCHES '**'`, `offset 11: wildcard * inside a word, wanted it alone between dots`},

	// Nesting beyond the limit.
	{strings.Repeat("(", MaxDepth+1) + "a EXISTS" + strings.Repeat(")", MaxDepth+1), "offset 64: expression nested deeper than 64 levels"},
	{strings.Repeat("NOT ", MaxDepth+1) + "a EXISTS", "offset 256: expression nested deeper than 64 levels"},

	// Size beyond the limits.
	{strings.Repeat("a EXISTS AND ", MaxConditions) + "b EXISTS", "offset 3328: more than 256 conditions in one query"},
	{strings.Repeat("a = 1 OR ", MaxConditions) + "b EXISTS", "offset 2304: more than 256 conditions in one query"},
	{"a = '" + strings.Repeat("x", MaxQueryBytes) + "'", "offset 4096: the query is 4102 bytes long; at most 4096 are taken"},
}

// The limits never refuse a query that a Tendermint node takes for a subscription (at most
// 512 bytes): not the one with the most conditions, nor the longest.
func TestLimitsTakeTendermintQueries(t *testing.T) {
	dense := strings.TrimSuffix(strings.Repeat("a=1 AND ", 512/8), " AND ") // 64 conditions
	long := "a = '" + strings.Repeat("x", 512-6) + "'"
	for _, src := range []string{dense, long} {
		if len(src) > 512 {
			t.Fatalf("a query of %d bytes", len(src))
		}
		if err := CheckTendermint(src); err != nil {
			t.Fatalf("CheckTendermint(%.30q…): %v", src, err)
		}
		if _, err := Compile(src); err != nil {
			t.Errorf("Compile(%.30q…): %v", src, err)
		}
	}
	// And at the limits themselves.
	most := strings.TrimSuffix(strings.Repeat("a=1 AND ", MaxConditions), " AND ")
	longest := "a = '" + strings.Repeat("x", MaxQueryBytes-6) + "'"
	deepest := strings.Repeat("(", MaxDepth) + "a EXISTS" + strings.Repeat(")", MaxDepth)
	for _, src := range []string{most, longest, deepest} {
		if _, err := Compile(src); err != nil {
			t.Errorf("Compile(%.30q…): %v", src, err)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range badQueries {
		q, err := Compile(tc.src)
		if err == nil {
			t.Errorf("Compile(%q) = %s, want error %q", tc.src, q.canonical(), tc.want)
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%q): error %T, want *SyntaxError", tc.src, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("Compile(%q):\n got %s\nwant %s", tc.src, err, tc.want)
		}
		if se.Offset < 0 || se.Offset > len(tc.src) {
			t.Errorf("Compile(%q): offset %d outside the query", tc.src, se.Offset)
		}
	}
}

func TestSyntaxErrorFields(t *testing.T) {
	_, err := Compile("tm.event = Tx")
	want := &SyntaxError{Offset: 11, Msg: "got tag, wanted number, timestamp, datestamp or string"}
	if se, ok := err.(*SyntaxError); !ok || *se != *want {
		t.Fatalf("Compile: %#v, want %#v", err, want)
	}
}
