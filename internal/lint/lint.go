// Package lint checks one CloudEvent in the JSON format against the
// CloudEvents 1.0 specification and the Open edX conventions of OEP-41
// (Asynchronous Server Event Messaging).
//
// Spec violations are found by internal/cevent, the validator the node uses for
// ingest, so an event that lint passes without errors is one the node
// accepts. The OEP-41 rules are added on top of it; see Rules for the list.
package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/evtctl/evtctl/internal/cevent"
)

// Severity tells whether a finding makes an event unacceptable.
type Severity string

// Severities.
const (
	// SeverityError marks a violation of the CloudEvents spec or of a
	// requirement of OEP-41.
	SeverityError Severity = "error"
	// SeverityWarning marks a departure from a recommendation.
	SeverityWarning Severity = "warning"
)

// Finding is one problem found in an event.
type Finding struct {
	// Rule is the stable id of the rule that found the problem.
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Path is the attribute concerned, e.g. "type", or "" for the whole event.
	Path string `json:"path"`
	// Message says what is wrong and how to fix it.
	Message string `json:"message"`
}

// String formats f for humans: "error type-shape: type: message".
func (f Finding) String() string {
	if f.Path == "" {
		return fmt.Sprintf("%s %s: %s", f.Severity, f.Rule, f.Message)
	}
	return fmt.Sprintf("%s %s: %s: %s", f.Severity, f.Rule, f.Path, f.Message)
}

// DefaultMaxBytes is the OEP-41 size limit of one event: 64 KiB.
const DefaultMaxBytes = 64 << 10

// Options adjust the checks. The zero value applies OEP-41 as written.
type Options struct {
	// MaxBytes is the largest allowed size of the event in its compact JSON
	// form (as a node stores and forwards it); zero or less means
	// DefaultMaxBytes.
	MaxBytes int
}

// Check lints event, one CloudEvent in the JSON format. It returns the
// findings in a stable order: spec violations first, then the OEP-41 rules
// in the order of Rules. Input that is not a single JSON object yields
// exactly one "spec" error.
func Check(event []byte, opts Options) []Finding {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	// No size limit here: the "size" rule reports it, and the other rules
	// still run on a large event.
	ev, err := cevent.DecodeStructured(event, cevent.Limits{MaxEventBytes: math.MaxInt})
	var cerr *cevent.Error
	if err != nil && !errors.As(err, &cerr) {
		cerr = &cevent.Error{Msg: err.Error()}
	}
	members, perr := parseObject(event)
	if perr != nil {
		msg := "invalid JSON: " + perr.Error()
		if cerr != nil {
			msg = cerr.Msg
		}
		return []Finding{{Rule: ruleSpec, Severity: SeverityError, Message: msg}}
	}
	e := newEvent(event, members, ev.JSON, cerr)
	var out []Finding
	for _, r := range rules {
		for _, p := range r.check(e, opts) {
			out = append(out, Finding{Rule: r.id, Severity: r.severity, Path: p.path, Message: p.msg})
		}
	}
	return out
}

// HasErrors reports whether any finding is an error.
func HasErrors(fs []Finding) bool {
	for _, f := range fs {
		if f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// Rule describes one lint rule.
type Rule struct {
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// Summary says in one line what the rule checks.
	Summary string `json:"summary"`
}

// Rules lists the rules Check applies, in the order it applies them.
func Rules() []Rule {
	out := make([]Rule, len(rules))
	for i, r := range rules {
		out[i] = Rule{ID: r.id, Severity: r.severity, Summary: r.summary}
	}
	return out
}

// member is one top-level member of the event object.
type member struct {
	name string
	raw  json.RawMessage
	// off is the byte offset of raw in the input.
	off int
}

// event is what the rules inspect.
type event struct {
	members []member
	// attrs maps each attribute to its last non-null value, as a JSON
	// decoder would see it; null means unset, as in internal/cevent.
	attrs map[string]json.RawMessage
	// size is the length of the compact JSON form.
	size int
	// specErr is internal/cevent's verdict on the whole event, or nil.
	specErr *cevent.Error
	// bad marks the attributes with a spec violation. The "spec" rule fills
	// it in, and the OEP-41 rules leave those attributes alone so that one
	// problem is reported once.
	bad map[string]bool
}

func newEvent(raw []byte, members []member, stored []byte, specErr *cevent.Error) *event {
	e := &event{members: members, attrs: make(map[string]json.RawMessage, len(members)), specErr: specErr, bad: map[string]bool{}}
	for _, m := range members {
		if string(m.raw) == "null" {
			delete(e.attrs, m.name)
			continue
		}
		e.attrs[m.name] = m.raw
	}
	if stored != nil {
		e.size = len(stored)
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, raw) == nil {
			e.size = buf.Len()
		} else {
			e.size = len(raw)
		}
	}
	return e
}

// str returns the value of a string attribute that is present and free of
// spec violations.
func (e *event) str(name string) (string, bool) {
	raw, ok := e.attrs[name]
	if !ok || e.bad[name] || len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// parseObject splits a JSON object into its members, in order. It fails if
// the input is not exactly one JSON object.
func parseObject(b []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("expected a CloudEvent as a JSON object, not %v", describeToken(tok))
	}
	var ms []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("expected a member name, not %v", describeToken(tok))
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, member{name: name, raw: raw, off: int(dec.InputOffset()) - len(raw)})
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, err
	}
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("unexpected %v after the event object", describeToken(tok))
	}
	return ms, nil
}

func describeToken(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(t))
	case string:
		return "a string"
	case nil:
		return "null"
	case bool:
		return "a boolean"
	}
	return "a number"
}
