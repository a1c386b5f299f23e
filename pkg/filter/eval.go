package filter

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// expr is a compiled expression: a condition, or AND, OR or NOT of expressions.
type expr struct {
	kind  exprKind
	terms []*expr   // the terms of AND and OR; the operand of NOT
	cond  condition // a condition's
}

type exprKind uint8

const (
	exprCond exprKind = iota
	exprAnd
	exprOr
	exprNot
)

func notExpr(x *expr) *expr { return &expr{kind: exprNot, terms: []*expr{x}} }

// join returns x and y joined by AND or OR (kind), merging the terms of x or y when it is
// itself of that kind.
func join(kind exprKind, x, y *expr) *expr {
	var terms []*expr
	if x.kind == kind {
		terms = x.terms
	} else {
		terms = []*expr{x}
	}
	if y.kind == kind {
		terms = append(terms, y.terms...)
	} else {
		terms = append(terms, y)
	}
	return &expr{kind: kind, terms: terms}
}

// jsonEnv holds, while a CloudEvent is matched, the values of the tags that several
// conditions test, each looked up once, when a condition first needs it. (The document is
// kept apart, so that escape analysis sees that a jsonEnv can stay on the stack.)
type jsonEnv struct {
	values  []gjson.Result // by condition.slot
	found   []uint64       // which of values are looked up, a bit each
	lookups int            // tags looked up in the document
}

// lookup returns the value of c's tag in doc.
func (v *jsonEnv) lookup(doc string, c *condition) gjson.Result {
	if c.slot < 0 {
		v.lookups++
		return gjson.Get(doc, c.path)
	}
	word, bit := c.slot/64, uint64(1)<<(c.slot%64)
	if v.found[word]&bit == 0 {
		v.lookups++
		v.values[c.slot] = gjson.Get(doc, c.path)
		v.found[word] |= bit
	}
	return v.values[c.slot]
}

func (e *expr) matchJSON(doc string, v *jsonEnv) bool {
	switch e.kind {
	case exprAnd:
		for _, x := range e.terms {
			if !x.matchJSON(doc, v) {
				return false
			}
		}
		return true
	case exprOr:
		for _, x := range e.terms {
			if x.matchJSON(doc, v) {
				return true
			}
		}
		return false
	case exprNot:
		return !e.terms[0].matchJSON(doc, v)
	}
	return e.cond.matchJSON(v.lookup(doc, &e.cond))
}

// walk calls fn for each condition of e, in order.
func (e *expr) walk(fn func(*condition)) {
	if e.kind == exprCond {
		fn(&e.cond)
		return
	}
	for _, x := range e.terms {
		x.walk(fn)
	}
}

// A condition tests the values of one tag.
type condition struct {
	tag    string
	path   string    // gjson path of the tag in a CloudEvent
	op     tokenKind // tokExists, tokEq, tokLt, tokLeq, tokGt, tokGeq, tokContains or tokMatches
	opText string
	arg    tokenKind // operand type: tokString, tokNumber, tokTime or tokDate; tokEOF for EXISTS
	text   string    // operand text: a string's contents or a literal as written
	num    float64   // number operand; NaN (matching nothing) if out of range
	when   time.Time // TIME operand
	day    int       // DATE operand, as dayNumber gives it
	pat    *pattern  // MATCHES operand
	slot   int       // where a jsonEnv keeps the value of path when other conditions test it too; -1: it does not
}

// newCondition returns the expression of one condition.
func newCondition(tag string, op, arg token) (*expr, *SyntaxError) {
	e := &expr{kind: exprCond}
	c := &e.cond
	*c = condition{
		tag:    tag,
		path:   jsonPath(tag),
		op:     op.kind,
		opText: op.text,
		arg:    arg.kind,
		text:   arg.text,
		slot:   -1,
	}
	switch arg.kind {
	case tokNumber:
		v, err := strconv.ParseFloat(arg.text, 64)
		if err != nil {
			v = math.NaN() // too large: Tendermint matches nothing either
		}
		c.num = v
	case tokTime:
		c.when = arg.when
	case tokDate:
		c.day = dayNumber(arg.when)
	case tokString:
		if op.kind == tokMatches {
			pat, err := compilePattern(arg.text, arg.pos+1)
			if err != nil {
				return nil, err
			}
			c.pat = pat
		}
	}
	return e, nil
}

// jsonPath maps a tag to the gjson path of its member in a CloudEvent: "data.a.b" descends into
// data, "tm.event" is the type, and any other tag names a top-level member, dots and all.
func jsonPath(tag string) string {
	if tag == "tm.event" {
		return "type"
	}
	rest, ok := strings.CutPrefix(tag, "data.")
	if !ok {
		return gjson.Escape(tag)
	}
	segs := strings.Split(rest, ".")
	for i, s := range segs {
		segs[i] = gjson.Escape(s)
	}
	return "data." + strings.Join(segs, ".")
}

// matchJSON tests the value of c's tag in a CloudEvent.
func (c *condition) matchJSON(r gjson.Result) bool {
	if !r.IsArray() {
		return c.testJSON(r)
	}
	found := false
	r.ForEach(func(_, v gjson.Result) bool {
		found = c.testJSON(v)
		return !found
	})
	return found
}

// testJSON tests one JSON value. Null is no value; an object, or an array inside an array,
// is a value that only EXISTS accepts.
func (c *condition) testJSON(v gjson.Result) bool {
	switch v.Type {
	case gjson.Null:
		return false
	case gjson.String:
		return c.op == tokExists || c.test(v.Str, 0, false)
	case gjson.Number:
		return c.op == tokExists || c.test(v.Raw, v.Num, true)
	case gjson.True:
		return c.op == tokExists || c.test("true", 0, false)
	case gjson.False:
		return c.op == tokExists || c.test("false", 0, false)
	default:
		return c.op == tokExists
	}
}

// test tests one value other than for EXISTS: text is its text form, and if isNum is set, num
// is its value as a JSON number.
func (c *condition) test(text string, num float64, isNum bool) bool {
	switch c.arg {
	case tokString:
		switch c.op {
		case tokEq:
			return text == c.text
		case tokContains:
			return strings.Contains(text, c.text)
		case tokMatches:
			return c.pat.match(text)
		}
	case tokNumber:
		if !isNum {
			var ok bool
			if num, ok = leadingNumber(text); !ok {
				return false
			}
		}
		return compareFloat(c.op, num, c.num)
	case tokTime:
		t, err := time.Parse(time.RFC3339, text)
		return err == nil && compare(c.op, t.Compare(c.when))
	case tokDate:
		d, ok := parseDay(text)
		return ok && compare(c.op, cmp.Compare(d, c.day))
	}
	return false
}

// leadingNumber reads a text value as a number the way Tendermint does: the longest prefix
// of the form digits[.digits], so "8.5stake" is 8.5 and "-3" is not a number.
func leadingNumber(s string) (float64, bool) {
	end := skipDigits(s, 0)
	if end == 0 {
		return 0, false
	}
	if end+1 < len(s) && s[end] == '.' && isDigit(rune(s[end+1])) {
		end = skipDigits(s, end+1)
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	return v, err == nil
}

// parseDay reads a date or an RFC 3339 timestamp as the day number of its UTC date.
func parseDay(s string) (int, bool) {
	layout := time.RFC3339
	if len(s) == len(dateLayout) {
		layout = dateLayout
	}
	t, err := time.Parse(layout, s)
	if err != nil {
		return 0, false
	}
	return dayNumber(t), true
}

// dayNumber numbers the UTC date of t so that later days have larger numbers.
func dayNumber(t time.Time) int {
	y, m, d := t.UTC().Date()
	return y*10000 + int(m)*100 + d
}

func compareFloat(op tokenKind, a, b float64) bool {
	switch op {
	case tokEq:
		return a == b
	case tokLt:
		return a < b
	case tokLeq:
		return a <= b
	case tokGt:
		return a > b
	case tokGeq:
		return a >= b
	}
	return false
}

// compare applies op to the result of a three-way comparison.
func compare(op tokenKind, c int) bool {
	switch op {
	case tokEq:
		return c == 0
	case tokLt:
		return c < 0
	case tokLeq:
		return c <= 0
	case tokGt:
		return c > 0
	case tokGeq:
		return c >= 0
	}
	return false
}
