package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
	"unicode/utf8"

	"github.com/evtctl/evtctl/pkg/client"
	"github.com/evtctl/evtctl/pkg/cursor"
	"github.com/tidwall/gjson"
)

// tmplState is what a template's execution works with; reused from item to item.
type tmplState struct {
	buf  bytes.Buffer
	view view // dot for the current item
}

// view is dot in a template. Data, Payload and Raw are methods, so that only templates
// that use them pay for decoding.
type view struct {
	Cursor, Event string
	CloudEvent    bool // the item's data is a CloudEvent

	ID, Type, Source, Subject, Time, DataContentType string

	raw, doc    string
	ev          event
	data        any
	payload     any
	dataErr     error
	payloadErr  error
	dataDone    bool
	payloadDone bool
}

// Raw is the item as the node sent it.
func (v *view) Raw() string { return v.raw }

// Data is the item's data decoded, numbers as json.Number; nil when there is none.
func (v *view) Data() (any, error) {
	if !v.dataDone {
		v.dataDone = true
		if v.doc != "" {
			v.data, v.dataErr = decodeJSON(v.doc)
		}
	}
	return v.data, v.dataErr
}

// Payload is the payload of the data format, decoded. A CloudEvent's data_base64 is
// decoded to bytes that print as text and marshal back to base64.
func (v *view) Payload() (any, error) {
	if v.payloadDone {
		return v.payload, v.payloadErr
	}
	v.payloadDone = true
	if v.ev.ce && v.ev.data == "" && v.ev.dataBase64 != "" {
		var s string
		if err := json.Unmarshal([]byte(v.ev.dataBase64), &s); err != nil {
			v.payloadErr = fmt.Errorf("data_base64 is not a string: %w", err)
			return nil, v.payloadErr
		}
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
		if err != nil {
			v.payloadErr = fmt.Errorf("data_base64: %w", err)
			return nil, v.payloadErr
		}
		v.payload = decoded(b)
		return v.payload, nil
	}
	v.payload, v.payloadErr = decodeJSON(v.ev.payload())
	return v.payload, v.payloadErr
}

// CursorTime is the time in the item's cursor (UTC), or the zero time.
func (v *view) CursorTime() time.Time {
	c, err := cursor.Parse(v.Cursor)
	if err != nil || v.Cursor == "" {
		return time.Time{}
	}
	return time.Unix(0, c.TS).UTC()
}

// decoded is a decoded data_base64 payload: it prints as text and marshals as base64.
type decoded []byte

func (b decoded) String() string { return string(b) }

func decodeJSON(s string) (any, error) {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

// viewFields are the names a template finds on dot, in the order help lists them.
var viewFields = []string{"Cursor", "Event", "CloudEvent", "ID", "Type", "Source", "Subject", "Time",
	"DataContentType", "Data", "Payload", "Raw", "CursorTime"}

// funcNames are the functions a template has beside text/template's own, in the order
// help lists them.
var funcNames = []string{"json", "pretty", "get", "item", "time", "upper", "lower", "trunc", "default"}

func (r *Renderer) parseTemplate(src string) error {
	st := &tmplState{}
	t, err := template.New("output").Funcs(template.FuncMap{
		"json":    func(v any) (string, error) { return marshal(v, "") },
		"pretty":  func(v any) (string, error) { return marshal(v, "  ") },
		"get":     st.get,
		"item":    st.item,
		"time":    formatTime,
		"upper":   strings.ToUpper,
		"lower":   strings.ToLower,
		"trunc":   trunc,
		"default": dflt,
	}).Parse(src)
	if err != nil {
		msg := err.Error()
		if strings.Contains(msg, "function ") && strings.HasSuffix(msg, " not defined") {
			msg += "; the functions are " + strings.Join(funcNames, " ") + " and text/template's own (printf, len, index, eq, and, or, not, ...)"
		}
		return fmt.Errorf("invalid template: %s", msg)
	}
	if err := checkFields(t.Tree.Root, true); err != nil {
		return fmt.Errorf("invalid template: %w", err)
	}
	r.tmpl, r.tstate = t, st
	return nil
}

// checkFields refuses a field of dot that does not exist, wherever dot is the event: the
// template's top level and the else branches there, not inside range or with (where dot
// is something else) nor in templates it defines. $ is the event everywhere.
func checkFields(n parse.Node, dotIsEvent bool) error {
	field := func(ident []string) error {
		if len(ident) > 0 && !slices.Contains(viewFields, ident[0]) {
			return unknownField(ident[0])
		}
		return nil
	}
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkFields(c, dotIsEvent); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkFields(n.Pipe, dotIsEvent)
	case *parse.TemplateNode:
		if n.Pipe != nil {
			return checkFields(n.Pipe, dotIsEvent)
		}
	case *parse.PipeNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Cmds {
			if err := checkFields(c, dotIsEvent); err != nil {
				return err
			}
		}
	case *parse.CommandNode:
		for _, a := range n.Args {
			if err := checkFields(a, dotIsEvent); err != nil {
				return err
			}
		}
	case *parse.ChainNode:
		return checkFields(n.Node, dotIsEvent)
	case *parse.FieldNode:
		if dotIsEvent {
			return field(n.Ident)
		}
	case *parse.VariableNode:
		if len(n.Ident) > 1 && n.Ident[0] == "$" {
			return field(n.Ident[1:])
		}
	case *parse.IfNode:
		return checkBranch(&n.BranchNode, dotIsEvent, dotIsEvent)
	case *parse.RangeNode:
		return checkBranch(&n.BranchNode, dotIsEvent, false)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode, dotIsEvent, false)
	}
	return nil
}

// checkBranch checks an if, range or with: its pipeline and else branch see the dot
// around them; its body sees dot as body says.
func checkBranch(b *parse.BranchNode, dotIsEvent, body bool) error {
	if err := checkFields(b.Pipe, dotIsEvent); err != nil {
		return err
	}
	if err := checkFields(b.List, body && dotIsEvent); err != nil {
		return err
	}
	return checkFields(b.ElseList, dotIsEvent)
}

// unknownField says that an event has no field name, and which it has: the one meant,
// when it is a slip away (another case, or one edit).
func unknownField(name string) error {
	hint, best := "", 2
	for _, f := range viewFields {
		d := editDistance(strings.ToLower(f), strings.ToLower(name))
		if d < best || (d == best && strings.EqualFold(f, name)) {
			hint, best = " (did you mean ."+f+"?)", d
		}
	}
	return fmt.Errorf("an event has no field .%s%s; it has .%s", name, hint, strings.Join(viewFields, " ."))
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// explainExec names the fields of an event when a template asks one for a field it
// lacks, as text/template says it: can't evaluate field X in type *render.view.
func explainExec(err error) error {
	const pre, post = "can't evaluate field ", " in type *render.view"
	msg := err.Error()
	i := strings.Index(msg, pre)
	if i < 0 || !strings.HasSuffix(msg, post) {
		return err
	}
	name := msg[i+len(pre) : len(msg)-len(post)]
	return fmt.Errorf("%s%w", msg[:i], unknownField(name))
}

func (r *Renderer) template(it client.Item) error {
	st := r.tstate
	doc := string(it.Data)
	ev := scanData(doc)
	st.view = view{Cursor: it.Cursor, Event: it.Event, raw: string(r.envelope(it)), doc: doc, ev: ev}
	if ev.ce {
		v := &st.view
		v.CloudEvent = true
		v.ID, v.Type, v.Source, v.Subject, v.Time = ev.id, ev.typ, ev.source, ev.subject, ev.time
		v.DataContentType = ev.contentType
	}
	st.buf.Reset()
	err := r.tmpl.Execute(&st.buf, &st.view)
	st.view = view{} // hold on to no item
	if err != nil {
		return itemError(it, explainExec(err))
	}
	out := st.buf.Bytes()
	if len(out) == 0 {
		return nil
	}
	if _, err := r.w.Write(out); err != nil {
		return err
	}
	if out[len(out)-1] != '\n' {
		return r.w.WriteByte('\n')
	}
	return nil
}

// get is the template function: the value at a gjson path in the item's data (the
// CloudEvent), as a string: get "data.title" is the event's data.title.
func (st *tmplState) get(path string) (string, error) {
	if err := checkPath(path); err != nil {
		return "", err
	}
	return gjson.Get(st.view.doc, path).String(), nil
}

// item is the template function: the value at a gjson path in the item as the node sent
// it ({"cursor", "event", "data"}), as a string.
func (st *tmplState) item(path string) (string, error) {
	if err := checkPath(path); err != nil {
		return "", err
	}
	return gjson.Get(st.view.raw, path).String(), nil
}

// marshal is JSON of v, compact when indent is "", without HTML escaping.
func marshal(v any, indent string) (string, error) {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", indent)
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// formatTime formats an RFC 3339 string or a time.Time with a Go layout; "" stays "".
func formatTime(layout string, v any) (string, error) {
	switch t := v.(type) {
	case time.Time:
		return t.Format(layout), nil
	case string:
		if t == "" {
			return "", nil
		}
		tt, err := time.Parse(time.RFC3339Nano, t)
		if err != nil {
			return "", fmt.Errorf("time: %q is not an RFC 3339 time", t)
		}
		return tt.Format(layout), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("time: cannot format a %T", v)
}

// trunc keeps the first n runes of s, or the last -n when n is negative.
func trunc(n int, s string) string {
	count := utf8.RuneCountInString(s)
	switch {
	case n >= 0 && count > n:
		i := 0
		for range n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
		}
		return s[:i]
	case n < 0 && count > -n:
		i := len(s)
		for range -n {
			_, size := utf8.DecodeLastRuneInString(s[:i])
			i -= size
		}
		return s[i:]
	}
	return s
}

// dflt returns v, or d when v is empty: nil, "", or an empty slice or map. false and 0
// are values, not empty.
func dflt(d, v any) any {
	if v == nil {
		return d
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.String, reflect.Slice, reflect.Map:
		if rv.Len() == 0 {
			return d
		}
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return d
		}
	}
	return v
}
