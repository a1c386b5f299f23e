package filter

import "strings"

// The canonical form of a query, fully parenthesized, for tests that parse it back.

// source returns the text q was compiled from.
func (q *Query) source() string {
	if q == nil {
		return ""
	}
	return q.src
}

// canonical returns q's expression fully parenthesized.
func (q *Query) canonical() string {
	if q.MatchesAll() {
		return ""
	}
	var b strings.Builder
	q.root.format(&b)
	return b.String()
}

// The format method writes a fully parenthesized form that parses back to the same tree.
func (e *expr) format(b *strings.Builder) {
	switch e.kind {
	case exprAnd, exprOr:
		sep := " AND "
		if e.kind == exprOr {
			sep = " OR "
		}
		b.WriteByte('(')
		for i, x := range e.terms {
			if i > 0 {
				b.WriteString(sep)
			}
			x.format(b)
		}
		b.WriteByte(')')
	case exprNot:
		b.WriteString("NOT ")
		e.terms[0].format(b)
	default:
		e.cond.format(b)
	}
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
