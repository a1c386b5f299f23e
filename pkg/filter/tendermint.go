package filter

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// A Tendermint node's filter language is the subset of this package's without OR, NOT,
// parentheses and MATCHES, and a Tendermint node words its errors in its own way. Compile
// reports an error in a query that uses none of the additions as the node does; CheckTendermint
// tells, before a query is sent to such a node, whether the node will take it.

// The messages of CheckTendermint for evtctl's additions.
const (
	andOnly    = "a Tendermint node accepts only conditions joined by AND"
	msgOr      = "OR is an evtctl extension; " + andOnly
	msgNot     = "NOT is an evtctl extension; " + andOnly
	msgParen   = "parentheses are an evtctl extension; " + andOnly
	msgMatches = "MATCHES is an evtctl extension; a Tendermint node's operators are =, <, <=, >, >=, CONTAINS and EXISTS"
	msgSpace   = "a query of only white space is an error on a Tendermint node (evtctl takes it to match everything); " +
		"send an empty query to match everything"
)

// CheckTendermint reports whether a Tendermint node accepts the query src. It returns nil if
// it does, and otherwise a *SyntaxError: at the first of evtctl's additions (OR, NOT,
// parentheses, MATCHES, a query of white space alone) that the query uses, saying so, or else
// the error the node gives for it, in the node's words.
func CheckTendermint(src string) error {
	tm := tendermintParse(src)
	if tm == nil {
		return nil
	}
	if ext := extension(src); ext != nil {
		return ext
	}
	return tm
}

// extension returns the first of evtctl's additions that src uses, as CheckTendermint reports
// it, or nil. The query need not be valid; what follows an error is not looked at.
func extension(src string) *SyntaxError {
	if src != "" && strings.TrimFunc(src, unicode.IsSpace) == "" {
		return &SyntaxError{Offset: 0, Msg: msgSpace}
	}
	p := newParser(src)
	_, _ = p.query()
	return p.ext
}

// noteExtension records t as the first of evtctl's additions the parser has met, if it is.
func (p *parser) noteExtension(t token) {
	if p.ext != nil {
		return
	}
	var msg string
	switch t.kind {
	case tokOr:
		msg = msgOr
	case tokNot:
		msg = msgNot
	case tokLParen, tokRParen:
		msg = msgParen
	case tokMatches:
		msg = msgMatches
	default:
		return
	}
	p.ext = &SyntaxError{Offset: t.pos, Msg: msg}
}

// tendermintParse returns the error a Tendermint node gives for the query src, or nil if the
// node accepts it. It models the node's parser over this package's tokens, which split the
// text where the node's scanner does: OR, NOT and MATCHES are tags to the node, and
// parentheses characters it has no token for.
//
// One message differs on purpose: where the node wants AND after a complete condition, it
// prints its token's number ("got tag, want 6"); this says "want AND operator".
func tendermintParse(src string) *SyntaxError {
	if src == "" {
		return nil // the node's handler does not parse an empty query; it matches everything
	}
	tp := tmParser{toks: scan(src)}
	if err := tp.condition(); err != nil {
		return err
	}
	for {
		t := tp.next()
		switch t.kind {
		case tokEOF, tokUnterminated:
			// The node's scanner reports an unterminated string as the end of the input,
			// which ends the query here.
			return nil
		case tokAnd:
			if err := tp.condition(); err != nil {
				return err
			}
			continue
		}
		got := tmKind(t.kind).String()
		if t.kind == tokInvalid || t.kind == tokError || isParen(t.kind) {
			got = "invalid token" // the node's scanner failed; its token is the invalid one
		}
		return &SyntaxError{Offset: t.pos, Msg: "got " + got + ", want " + tokAnd.String()}
	}
}

type tmParser struct {
	toks []token
	i    int
}

func (tp *tmParser) next() token {
	t := tp.toks[min(tp.i, len(tp.toks)-1)]
	tp.i++
	return t
}

// condition reads tag, operator and operand, as the node's parser does.
func (tp *tmParser) condition() *SyntaxError {
	if err := tp.require(tokTag); err != nil {
		return err
	}
	op := tp.next()
	if err := tp.check(op, tokLeq, tokGeq, tokLt, tokGt, tokEq, tokContains, tokExists); err != nil {
		return err
	}
	switch op.kind {
	case tokExists:
		return nil
	case tokEq:
		return tp.require(tokNumber, tokTime, tokDate, tokString)
	case tokContains:
		return tp.require(tokString)
	default:
		return tp.require(tokNumber, tokTime, tokDate)
	}
}

func (tp *tmParser) require(wanted ...tokenKind) *SyntaxError { return tp.check(tp.next(), wanted...) }

// check reports, in the node's words, a token that is none of the wanted kinds.
func (tp *tmParser) check(t token, wanted ...tokenKind) *SyntaxError {
	switch {
	case t.kind == tokEOF || t.kind == tokUnterminated:
		return &SyntaxError{Offset: t.pos, Msg: "EOF"}
	case t.kind == tokInvalid || isParen(t.kind):
		r := []rune(t.text)[0]
		return &SyntaxError{Offset: t.pos, Msg: fmt.Sprintf("invalid input %c at offset %d", r, t.pos+len(t.text))}
	case t.kind == tokError:
		return &SyntaxError{Offset: t.pos, Msg: t.text}
	case slices.Contains(wanted, tmKind(t.kind)):
		return nil
	}
	var msg strings.Builder
	msg.WriteString("got " + tmKind(t.kind).String() + ", wanted ")
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
	return &SyntaxError{Offset: t.pos, Msg: msg.String()}
}

// tmKind is the kind of token the node reads where this package reads one of kind k.
func tmKind(k tokenKind) tokenKind {
	if isTendermintTag(k) {
		return tokTag
	}
	return k
}

func isParen(k tokenKind) bool { return k == tokLParen || k == tokRParen }
