package filter

import (
	"cmp"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// expr is a compiled expression. Each method is given either an attribute source or a JSON
// object (possibly "" for a document without attributes).
type expr interface {
	match(a Attributes) bool
	matchJSON(doc string) bool
	format(b *strings.Builder)
}

type (
	andExpr []expr
	orExpr  []expr
	notExpr struct{ x expr }
)

// add appends x, merging the terms of a nested conjunction.
func (e andExpr) add(x expr) andExpr {
	if inner, ok := x.(andExpr); ok {
		return append(e, inner...)
	}
	return append(e, x)
}

// add appends x, merging the terms of a nested disjunction.
func (e orExpr) add(x expr) orExpr {
	if inner, ok := x.(orExpr); ok {
		return append(e, inner...)
	}
	return append(e, x)
}

func (e andExpr) match(a Attributes) bool {
	for _, x := range e {
		if !x.match(a) {
			return false
		}
	}
	return true
}

func (e andExpr) matchJSON(doc string) bool {
	for _, x := range e {
		if !x.matchJSON(doc) {
			return false
		}
	}
	return true
}

func (e orExpr) match(a Attributes) bool {
	for _, x := range e {
		if x.match(a) {
			return true
		}
	}
	return false
}

func (e orExpr) matchJSON(doc string) bool {
	for _, x := range e {
		if x.matchJSON(doc) {
			return true
		}
	}
	return false
}

func (e notExpr) match(a Attributes) bool   { return !e.x.match(a) }
func (e notExpr) matchJSON(doc string) bool { return !e.x.matchJSON(doc) }

// The format methods write a fully parenthesized form that parses back to the same tree.

func (e andExpr) format(b *strings.Builder) { formatTerms(b, e, " AND ") }
func (e orExpr) format(b *strings.Builder)  { formatTerms(b, e, " OR ") }

func formatTerms(b *strings.Builder, terms []expr, sep string) {
	b.WriteByte('(')
	for i, x := range terms {
		if i > 0 {
			b.WriteString(sep)
		}
		x.format(b)
	}
	b.WriteByte(')')
}

func (e notExpr) format(b *strings.Builder) {
	b.WriteString("NOT ")
	e.x.format(b)
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
}

func newCondition(tag string, op, arg token) (*condition, *SyntaxError) {
	c := &condition{
		tag:    tag,
		path:   jsonPath(tag),
		op:     op.kind,
		opText: op.text,
		arg:    arg.kind,
		text:   arg.text,
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
	return c, nil
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

func (c *condition) format(b *strings.Builder) {
	b.WriteString(c.tag)
	if c.tag == "TIME" || c.tag == "DATE" {
		b.WriteByte('\t') // a space would start a literal
	} else {
		b.WriteByte(' ')
	}
	b.WriteString(c.opText)
	switch c.arg {
	case tokString:
		b.WriteString(" '" + c.text + "'")
	case tokNumber:
		b.WriteString(" " + c.text)
	case tokTime:
		b.WriteString(" TIME " + c.text)
	case tokDate:
		b.WriteString(" DATE " + c.text)
	}
}

func (c *condition) match(a Attributes) bool {
	for _, v := range a.Values(c.tag) {
		if c.op == tokExists || c.test(v, 0, false) {
			return true
		}
	}
	return false
}

func (c *condition) matchJSON(doc string) bool {
	r := gjson.Get(doc, c.path)
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
