package lint

import (
	"encoding/json"
	"errors"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/evtctl/evtctl/internal/cevent"
)

// placeholders are valid values of the required attributes, used to build
// probe events.
var placeholders = [...]struct{ name, raw string }{
	{"specversion", `"1.0"`},
	{"id", `"x"`},
	{"source", `"/x"`},
	{"type", `"x"`},
}

var offsetRE = regexp.MustCompile(`byte offset (\d+)`)

// checkSpec reports CloudEvents spec violations as internal/cevent finds them.
// cevent stops at the first problem, so each member is also checked on its
// own, in a probe event made of that member and placeholder values of the
// required attributes; that finds every bad attribute at once and says
// which attribute each problem belongs to. Problems come in input order,
// then missing required attributes, then a problem involving several
// attributes. It fills in e.bad.
func checkSpec(e *event, _ Options) []problem {
	if e.specErr == nil {
		return nil
	}
	var found []problem
	seen := map[string]bool{}
	add := func(path, msg string) {
		if path != "" {
			e.bad[path] = true
		}
		if !seen[msg] {
			seen[msg] = true
			found = append(found, problem{path, msg})
		}
	}
	for _, m := range e.members {
		if msg := probe(m); msg != "" {
			add(m.name, msg)
		}
	}
	for _, p := range placeholders {
		if _, ok := e.attrs[p.name]; !ok {
			if msg := probe(member{name: p.name}); msg != "" {
				add(p.name, msg)
			}
		}
	}
	// The whole event's verdict is usually one of the problems found above;
	// if not, it concerns several attributes (e.g. data and data_base64
	// together) and comes last.
	whole := e.specErr.Msg
	if seen[whole] {
		return found
	}
	path := guessPath(whole)
	if path != "" {
		e.bad[path] = true
	}
	return append(found, problem{path, whole})
}

// probe checks member m on its own and returns cevent's complaint, or "".
// A member with no raw value probes the absence of a required attribute.
// Byte offsets in the message are translated to offsets in the input.
func probe(m member) string {
	b := make([]byte, 0, 64+len(m.name)+len(m.raw))
	b = append(b, '{')
	for _, p := range placeholders {
		if p.name == m.name {
			continue
		}
		b = strconv.AppendQuote(b, p.name)
		b = append(b, ':')
		b = append(b, p.raw...)
		b = append(b, ',')
	}
	start := 0
	if m.raw == nil {
		b = b[:len(b)-1] // the trailing comma
	} else {
		name, _ := json.Marshal(m.name) // a string always marshals
		b = append(b, name...)
		b = append(b, ':')
		start = len(b)
		b = append(b, m.raw...)
	}
	b = append(b, '}')
	_, err := cevent.DecodeStructured(b, cevent.Limits{MaxEventBytes: math.MaxInt})
	if err == nil {
		return ""
	}
	msg := err.Error()
	var cerr *cevent.Error
	if errors.As(err, &cerr) {
		msg = cerr.Msg
	}
	return offsetRE.ReplaceAllStringFunc(msg, func(s string) string {
		n, err := strconv.Atoi(offsetRE.FindStringSubmatch(s)[1])
		if err != nil || n < start || m.raw == nil {
			return s
		}
		return "byte offset " + strconv.Itoa(n-start+m.off)
	})
}

var attrRE = regexp.MustCompile(`(?:attribute|member name) "([a-z0-9_]+)"`)

// guessPath names the attribute a cevent message is about, or returns "".
func guessPath(msg string) string {
	if m := attrRE.FindStringSubmatch(msg); m != nil {
		return m[1]
	}
	switch {
	case strings.Contains(msg, "data_base64"):
		return "data_base64"
	case strings.HasPrefix(msg, "data "):
		return "data"
	}
	return ""
}
