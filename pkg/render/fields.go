package render

import (
	"errors"
	"fmt"

	"github.com/tidwall/gjson"
)

// field is one projected path and its key, ready to append: "path": or ,"path":
type field struct {
	path string
	key  []byte
}

func compileFields(paths []string) ([]field, error) {
	fs := make([]field, 0, len(paths))
	seen := make(map[string]bool, len(paths))
	for i, p := range paths {
		if err := checkPath(p); err != nil {
			return nil, err
		}
		if seen[p] {
			return nil, fmt.Errorf("field path %q is given twice", p)
		}
		seen[p] = true
		var key []byte
		if i > 0 {
			key = append(key, ',')
		}
		key = appendJSONString(key, p)
		fs = append(fs, field{path: p, key: append(key, ':')})
	}
	return fs, nil
}

// appendFields appends one JSON object: each field's key and the JSON its path matches in
// doc, compacted, or null.
func appendFields(dst []byte, doc string, fs []field) ([]byte, error) {
	dst = append(dst, '{')
	for _, f := range fs {
		dst = append(dst, f.key...)
		res := gjson.Get(doc, f.path)
		if res.Raw == "" {
			dst = append(dst, nullJSON...)
			continue
		}
		var err error
		if dst, err = appendCompact(dst, res.Raw); err != nil {
			return dst, fmt.Errorf("field %q: %w", f.path, err)
		}
	}
	return append(dst, '}'), nil
}

// checkPath refuses gjson paths that cannot be what the user meant. gjson accepts almost
// anything, so this catches the obvious slips: an empty path or component, brackets that
// do not balance, an unterminated string in a query, a dangling escape.
func checkPath(p string) error {
	if p == "" {
		return errors.New("field path is empty")
	}
	var open []byte // closing brackets expected, innermost last
	in := false     // inside a quoted string, within brackets
	prevSep := true // at the start of a component at depth 0
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\':
			if i+1 == len(p) {
				return fmt.Errorf("field path %q ends with an escape", p)
			}
			i++
		case in:
			if c == '"' {
				in = false
			}
		case c == '"' && len(open) > 0:
			in = true
		case c == '(' || c == '[' || c == '{':
			open = append(open, closer(c))
		case c == ')' || c == ']' || c == '}':
			if len(open) == 0 || open[len(open)-1] != c {
				return fmt.Errorf("field path %q has an unbalanced %q at offset %d", p, c, i)
			}
			open = open[:len(open)-1]
		case (c == '.' || c == '|') && len(open) == 0:
			if prevSep {
				return fmt.Errorf("field path %q has an empty component at offset %d", p, i)
			}
			prevSep = true
			continue
		}
		prevSep = false
	}
	switch {
	case in:
		return fmt.Errorf("field path %q has an unterminated string", p)
	case len(open) > 0:
		return fmt.Errorf("field path %q lacks a closing %q", p, open[len(open)-1])
	case prevSep:
		return fmt.Errorf("field path %q ends with an empty component", p)
	}
	return nil
}

func closer(c byte) byte {
	switch c {
	case '(':
		return ')'
	case '[':
		return ']'
	}
	return '}'
}
