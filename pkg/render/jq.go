package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/itchyny/gojq"
)

// JQ is a compiled jq expression (gojq's dialect), run on each JSON value a command
// writes. It is not safe for concurrent use.
type JQ struct {
	ctx  context.Context
	code *gojq.Code
}

// JQError is an expression that does not parse or compile.
type JQError struct {
	Expr string
	// Offset is the byte of Expr where the parser found the mistake, or -1 when the
	// expression parsed but did not compile (a function that does not exist, say).
	Offset int
	Err    error
}

func (e *JQError) Error() string { return e.Err.Error() }
func (e *JQError) Unwrap() error { return e.Err }

// CompileJQ parses and compiles expr. The expression stops, with ctx's error, when ctx
// ends; so a runaway one (repeat(1)) can be interrupted.
func CompileJQ(ctx context.Context, expr string) (*JQ, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		off := len(expr)
		var pe *gojq.ParseError
		if errors.As(err, &pe) {
			// Offset is where the parser stood after reading the token it refused.
			off = min(max(pe.Offset-len(pe.Token), 0), len(expr))
		}
		return nil, &JQError{Expr: expr, Offset: off, Err: err}
	}
	code, err := gojq.Compile(q)
	if err != nil {
		return nil, &JQError{Expr: expr, Offset: -1, Err: err}
	}
	return &JQ{ctx: ctx, code: code}, nil
}

// Append runs q on the JSON value doc and appends each result on a line of its own: a
// string as its text (a template's way, and jq -r's), anything else as compact JSON.
// Numbers keep the digits they were written with. An expression with no result appends
// nothing; halt ends the results early. A runtime error of the expression is returned, with
// what was appended before it.
func (q *JQ) Append(dst, doc []byte) ([]byte, error) {
	v, err := decodeJSON(bytesString(doc))
	if err != nil {
		return dst, fmt.Errorf("not JSON: %w", err)
	}
	iter := q.code.RunWithContext(q.ctx, v)
	for {
		r, ok := iter.Next()
		if !ok {
			return dst, nil
		}
		switch r := r.(type) {
		case error:
			var he *gojq.HaltError
			if errors.As(r, &he) && he.Value() == nil {
				return dst, nil
			}
			return dst, r
		case string:
			dst = append(dst, r...)
		default:
			b, err := gojq.Marshal(r)
			if err != nil {
				return dst, err
			}
			dst = append(dst, b...)
		}
		dst = append(dst, '\n')
	}
}

// Writer returns a writer that takes lines of JSON, one value per line, and writes to w
// what q makes of each. A line is run once its newline is written; empty lines are
// dropped. A runtime error of the expression fails the Write, prefixed "jq: ".
func (q *JQ) Writer(w io.Writer) io.Writer {
	return &jqWriter{q: q, w: w}
}

type jqWriter struct {
	q       *JQ
	w       io.Writer
	partial []byte // a line begun but not ended
	out     []byte
}

func (jw *jqWriter) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		i := bytes.IndexByte(p[n:], '\n')
		if i < 0 {
			jw.partial = append(jw.partial, p[n:]...)
			return len(p), nil
		}
		line := p[n : n+i]
		n += i + 1
		if len(jw.partial) > 0 {
			jw.partial = append(jw.partial, line...)
			line = jw.partial
		}
		if len(bytes.TrimSpace(line)) == 0 {
			jw.partial = jw.partial[:0]
			continue
		}
		out, err := jw.q.Append(jw.out[:0], line)
		jw.out, jw.partial = out, jw.partial[:0]
		if len(out) > 0 {
			if _, werr := jw.w.Write(out); werr != nil {
				return n, werr
			}
		}
		if err != nil {
			return n, fmt.Errorf("jq: %w", err)
		}
	}
	return n, nil
}
