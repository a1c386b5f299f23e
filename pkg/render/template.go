package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/template"
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

func (r *Renderer) parseTemplate(src string) error {
	st := &tmplState{}
	t, err := template.New("output").Funcs(template.FuncMap{
		"json":    func(v any) (string, error) { return marshal(v, "") },
		"pretty":  func(v any) (string, error) { return marshal(v, "  ") },
		"get":     st.get,
		"time":    formatTime,
		"upper":   strings.ToUpper,
		"lower":   strings.ToLower,
		"trunc":   trunc,
		"default": dflt,
	}).Parse(src)
	if err != nil {
		return fmt.Errorf("invalid template: %w", err)
	}
	r.tmpl, r.tstate = t, st
	return nil
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
		return itemError(it, err)
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

// get is the template function: the value at a gjson path in the item, as a string.
func (st *tmplState) get(path string) (string, error) {
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
