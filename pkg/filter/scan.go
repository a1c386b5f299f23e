package filter

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"
)

// The lexical rules follow Tendermint's query scanner (internal/pubsub/query/syntax) so that the
// same text splits into the same tokens and fails at the same offsets:
//
//   - whitespace is anything unicode.IsSpace accepts;
//   - a number is ASCII digits with an optional '.' and more digits ("5." is a number);
//   - a tag is a run of letters, digits, '_' and '.', not starting with an ASCII digit;
//   - a string is everything between two single quotes, with no escapes;
//   - TIME and DATE followed by exactly one ASCII space start a timestamp or datestamp literal;
//     otherwise they are tags;
//   - keywords are whole words in upper case; "and" is a tag.

type tokenKind uint8

const (
	tokEOF          tokenKind = iota
	tokInvalid                // a character that starts no token
	tokError                  // a malformed token; text holds the message
	tokUnterminated           // a string without its closing quote; text holds the message
	tokTag
	tokString
	tokNumber
	tokTime
	tokDate
	tokAnd
	tokOr
	tokNot
	tokContains
	tokExists
	tokMatches
	tokEq
	tokLt
	tokLeq
	tokGt
	tokGeq
	tokLParen
	tokRParen
)

// tokenNames are the words used in error messages; where Tendermint has a token, the word is
// Tendermint's.
var tokenNames = [...]string{
	tokEOF:          "end of input",
	tokInvalid:      "invalid input",
	tokError:        "invalid token",
	tokUnterminated: "unterminated string",
	tokTag:          "tag",
	tokString:       "string",
	tokNumber:       "number",
	tokTime:         "timestamp",
	tokDate:         "datestamp",
	tokAnd:          "AND operator",
	tokOr:           "OR operator",
	tokNot:          "NOT operator",
	tokContains:     "CONTAINS operator",
	tokExists:       "EXISTS operator",
	tokMatches:      "MATCHES operator",
	tokEq:           "= operator",
	tokLt:           "< operator",
	tokLeq:          "<= operator",
	tokGt:           "> operator",
	tokGeq:          ">= operator",
	tokLParen:       "left parenthesis",
	tokRParen:       "right parenthesis",
}

func (k tokenKind) String() string { return tokenNames[k] }

// keywords spells the tokens that are words.
var keywords = [...]string{
	tokTime:     "TIME",
	tokDate:     "DATE",
	tokAnd:      "AND",
	tokOr:       "OR",
	tokNot:      "NOT",
	tokContains: "CONTAINS",
	tokExists:   "EXISTS",
	tokMatches:  "MATCHES",
}

// keyword returns the upper-case word that starts a token of kind k, or "".
func (k tokenKind) keyword() string {
	if int(k) < len(keywords) {
		return keywords[k]
	}
	return ""
}

// isOperator reports whether k can follow a tag in a condition.
func (k tokenKind) isOperator() bool {
	return k >= tokContains && k <= tokGeq
}

// Year range of TIME and DATE literals, as in Tendermint.
const minYear, maxYear = 1900, 2999

const dateLayout = "2006-01-02"

type token struct {
	kind tokenKind
	pos  int       // byte offset of the token's first byte
	text string    // spelling; a string's contents; a literal's value text; an error message
	when time.Time // value of a tokTime or tokDate
}

// scan splits src into tokens. Scanning stops after the first bad token, so the last token is
// tokEOF, tokInvalid, tokError or tokUnterminated; the parser reports a bad token only if it
// gets that far, as Tendermint's does.
func scan(src string) []token {
	var toks []token
	for pos := 0; ; {
		t, end := scanToken(src, pos)
		toks = append(toks, t)
		switch t.kind {
		case tokEOF, tokInvalid, tokError, tokUnterminated:
			return toks
		}
		pos = end
	}
}

// scanToken reads the token at or after pos and returns it with the offset just past it.
func scanToken(src string, pos int) (token, int) {
	for pos < len(src) {
		r, n := utf8.DecodeRuneInString(src[pos:])
		if !unicode.IsSpace(r) {
			break
		}
		pos += n
	}
	if pos == len(src) {
		return token{kind: tokEOF, pos: pos}, pos
	}

	r, n := utf8.DecodeRuneInString(src[pos:])
	switch {
	case isDigit(r):
		return scanNumber(src, pos)
	case isTagRune(r):
		return scanWord(src, pos)
	}
	op := func(kind tokenKind, width int) (token, int) {
		return token{kind: kind, pos: pos, text: src[pos : pos+width]}, pos + width
	}
	next := byte(0)
	if pos+1 < len(src) {
		next = src[pos+1]
	}
	switch r {
	case '\'':
		return scanString(src, pos)
	case '=':
		return op(tokEq, 1)
	case '<':
		if next == '=' {
			return op(tokLeq, 2)
		}
		return op(tokLt, 1)
	case '>':
		if next == '=' {
			return op(tokGeq, 2)
		}
		return op(tokGt, 1)
	case '(':
		return op(tokLParen, 1)
	case ')':
		return op(tokRParen, 1)
	}
	return op(tokInvalid, n)
}

func scanNumber(src string, start int) (token, int) {
	end := skipDigits(src, start)
	if end < len(src) && src[end] == '.' {
		end = skipDigits(src, end+1)
	}
	return token{kind: tokNumber, pos: start, text: src[start:end]}, end
}

func skipDigits(src string, i int) int {
	for i < len(src) && isDigit(rune(src[i])) {
		i++
	}
	return i
}

func scanString(src string, start int) (token, int) {
	for i := start + 1; i < len(src); i++ {
		if src[i] == '\'' {
			return token{kind: tokString, pos: start, text: src[start+1 : i]}, i + 1
		}
	}
	return token{kind: tokUnterminated, pos: start, text: "unterminated string, wanted closing quote"}, len(src)
}

func scanWord(src string, start int) (token, int) {
	end := start
	for end < len(src) {
		r, n := utf8.DecodeRuneInString(src[end:])
		if !isTagRune(r) {
			break
		}
		end += n
	}
	word := src[start:end]
	spaced := end < len(src) && src[end] == ' '
	switch {
	case word == "TIME" && spaced:
		return scanStamp(src, start, end+1, tokTime)
	case word == "DATE" && spaced:
		return scanStamp(src, start, end+1, tokDate)
	}
	for kind := tokAnd; kind <= tokMatches; kind++ {
		if word == keywords[kind] {
			return token{kind: kind, pos: start, text: word}, end
		}
	}
	return token{kind: tokTag, pos: start, text: word}, end
}

// scanStamp reads the literal of a TIME or DATE token that starts at start and whose value
// text starts at from. Messages are Tendermint's.
func scanStamp(src string, start, from int, kind tokenKind) (token, int) {
	layout, what, label := time.RFC3339, "timestamp", "TIME"
	ok := isTimeByte
	if kind == tokDate {
		layout, what, label = dateLayout, "datestamp", "DATE"
		ok = isDateByte
	}
	end := from
	for end < len(src) && ok(src[end]) {
		end++
	}
	text := src[from:end]
	fail := func(msg string) (token, int) {
		return token{kind: tokError, pos: start, text: msg}, end
	}
	t, err := time.Parse(layout, text)
	if err != nil {
		return fail(fmt.Sprintf("invalid %s value: %v", label, err))
	}
	if y := t.Year(); y < minYear || y > maxYear {
		return fail(fmt.Sprintf("%s year %d out of range", what, y))
	}
	return token{kind: kind, pos: start, text: text, when: t}, end
}

func isDigit(r rune) bool { return '0' <= r && r <= '9' }

func isTagRune(r rune) bool {
	return r == '.' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r)
}

func isTimeByte(c byte) bool {
	return isDigit(rune(c)) || c == '-' || c == 'T' || c == ':' || c == '+' || c == 'Z'
}

func isDateByte(c byte) bool { return isDigit(rune(c)) || c == '-' }
