package filter

import (
	"fmt"
	"slices"
	"strings"
)

// Grammar:
//
//	query     = [ or ] EOF
//	or        = and { "OR" and }
//	and       = unary { "AND" unary }
//	unary     = "NOT" unary | "(" or ")" | condition
//	condition = tag ( "EXISTS"
//	                | "=" ( number | time | date | string )
//	                | ( "<" | "<=" | ">" | ">=" ) ( number | time | date )
//	                | ( "CONTAINS" | "MATCHES" ) string )
//
// OR, NOT and MATCHES are tags to Tendermint, so where one of them stands in place of a tag and
// is followed by an operator, it is read as a tag: "NOT EXISTS" is a condition on the tag NOT,
// as it is for Tendermint.

// Limits of a query, so that compiling and evaluating one costs a bounded amount of work. A
// Tendermint node caps the queries of its subscriptions at 512 bytes, which leaves room for
// about 70 conditions; the events method has no cap there.
const (
	// MaxQueryBytes is the longest query Compile takes.
	MaxQueryBytes = 4096
	// MaxConditions is the most conditions a query may have.
	MaxConditions = 256
	// MaxDepth is the deepest that parentheses and NOTs may nest (the parser and the
	// evaluator handle them by recursion).
	MaxDepth = 64
)

// What may follow a tag, and what may follow each operator, in Tendermint's order.
var (
	operatorKinds = []tokenKind{tokLeq, tokGeq, tokLt, tokGt, tokEq, tokContains, tokExists, tokMatches}
	eqOperands    = []tokenKind{tokNumber, tokTime, tokDate, tokString}
	orderOperands = []tokenKind{tokNumber, tokTime, tokDate}
	textOperands  = []tokenKind{tokString}
)

type parser struct {
	toks  []token
	i     int
	depth int
	conds int          // conditions so far
	ext   *SyntaxError // the first of evtctl's additions met, as CheckTendermint words it
}

func newParser(src string) *parser { return &parser{toks: scan(src)} }

// parse returns the expression of src, or nil for an empty query. An error in a query that
// uses none of evtctl's additions up to the point of the error is worded as a Tendermint node
// words it.
func parse(src string) (*expr, *SyntaxError) {
	p := newParser(src)
	x, err := p.query()
	if err != nil && p.ext == nil {
		if tm := tendermintParse(src); tm != nil {
			return nil, tm
		}
	}
	return x, err
}

func (p *parser) query() (*expr, *SyntaxError) {
	if p.peek(0).kind == tokEOF {
		return nil, nil
	}
	x, err := p.or()
	if err == nil {
		switch t := p.peek(0); t.kind {
		case tokEOF:
			return x, nil
		case tokUnterminated:
			// Tendermint's parser stops at the first unterminated string after a complete
			// query and accepts what came before; so must we, to accept every query it does.
			return x, nil
		case tokRParen:
			err = &SyntaxError{Offset: t.pos, Msg: "unmatched right parenthesis"}
		default:
			err = unexpected(t, tokAnd, tokOr, tokEOF)
		}
	}
	// A parenthesis where the query goes wrong is one of evtctl's additions too.
	for _, t := range p.toks {
		if t.pos == err.Offset && isParen(t.kind) {
			p.noteExtension(t)
		}
	}
	return nil, err
}

// peek returns the token n places ahead; the last token repeats for ever.
func (p *parser) peek(n int) token {
	return p.toks[min(p.i+n, len(p.toks)-1)]
}

func (p *parser) next() token {
	t := p.peek(0)
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) or() (*expr, *SyntaxError) {
	x, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.peek(0).kind == tokOr {
		p.noteExtension(p.next())
		y, err := p.and()
		if err != nil {
			return nil, err
		}
		x = join(exprOr, x, y)
	}
	return x, nil
}

func (p *parser) and() (*expr, *SyntaxError) {
	x, err := p.unary()
	if err != nil {
		return nil, err
	}
	for p.peek(0).kind == tokAnd {
		p.next()
		y, err := p.unary()
		if err != nil {
			return nil, err
		}
		x = join(exprAnd, x, y)
	}
	return x, nil
}

func (p *parser) unary() (*expr, *SyntaxError) {
	t := p.peek(0)
	switch {
	case t.kind == tokLParen:
		p.noteExtension(t)
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		p.next()
		x, err := p.or()
		if err != nil {
			return nil, err
		}
		if end := p.next(); end.kind != tokRParen {
			return nil, unexpected(end, tokAnd, tokOr, tokRParen)
		}
		return x, nil
	case t.kind == tokNot && !p.peek(1).kind.isOperator():
		p.noteExtension(t)
		if err := p.enter(t); err != nil {
			return nil, err
		}
		defer p.leave()
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return notExpr(x), nil
	case t.kind == tokTag, isTendermintTag(t.kind) && p.peek(1).kind.isOperator():
		return p.condition()
	}
	return nil, unexpected(t, tokTag, tokNot, tokLParen)
}

// isTendermintTag reports whether k is a keyword of this package that Tendermint reads as a tag.
func isTendermintTag(k tokenKind) bool {
	return k == tokOr || k == tokNot || k == tokMatches
}

func (p *parser) condition() (*expr, *SyntaxError) {
	tag, op := p.next(), p.next()
	if p.conds++; p.conds > MaxConditions {
		return nil, &SyntaxError{Offset: tag.pos, Msg: fmt.Sprintf("more than %d conditions in one query", MaxConditions)}
	}
	var operands []tokenKind
	switch op.kind {
	case tokExists:
		return newCondition(tag.text, op, token{})
	case tokEq:
		operands = eqOperands
	case tokLt, tokLeq, tokGt, tokGeq:
		operands = orderOperands
	case tokContains:
		operands = textOperands
	case tokMatches:
		p.noteExtension(op)
		operands = textOperands
	default:
		err := unexpected(op, operatorKinds...)
		if op.kind != tokError && op.kind != tokUnterminated {
			err.Msg += keywordHint(tag.text, []tokenKind{tokNot}) // "not a EXISTS"
		}
		return nil, err
	}
	arg := p.next()
	if !slices.Contains(operands, arg.kind) {
		return nil, unexpected(arg, operands...)
	}
	return newCondition(tag.text, op, arg)
}

func (p *parser) enter(t token) *SyntaxError {
	if p.depth++; p.depth > MaxDepth {
		return &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf("expression nested deeper than %d levels", MaxDepth)}
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// unexpected reports that t is none of the wanted kinds, in Tendermint's words:
// "got tag, wanted number, timestamp, datestamp or string".
func unexpected(t token, wanted ...tokenKind) *SyntaxError {
	if t.kind == tokError || t.kind == tokUnterminated {
		return &SyntaxError{Offset: t.pos, Msg: t.text}
	}
	got := t.kind.String()
	if t.kind == tokInvalid {
		got = fmt.Sprintf("invalid input %q", t.text)
	}
	var msg strings.Builder
	msg.WriteString("got " + got + ", wanted ")
	for i, k := range wanted {
		switch {
		case i == 0:
		case i == len(wanted)-1:
			msg.WriteString(" or ")
		default:
			msg.WriteString(", ")
		}
		msg.WriteString(k.String())
	}
	if t.kind == tokTag {
		msg.WriteString(keywordHint(t.text, wanted))
	}
	return &SyntaxError{Offset: t.pos, Msg: msg.String()}
}

// keywordHint explains why a tag that reads like one of the wanted keywords was not taken as it.
func keywordHint(word string, wanted []tokenKind) string {
	for _, k := range wanted {
		kw := k.keyword()
		switch {
		case kw == "" || !strings.EqualFold(word, kw):
		case word != kw:
			return " (keywords are upper case: did you mean " + kw + "?)"
		case k == tokTime || k == tokDate:
			return " (" + kw + " must be followed by one space and its value)"
		}
	}
	return ""
}
