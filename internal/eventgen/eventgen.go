// Package eventgen builds CloudEvents for emit: from flag values and templates, or from
// JSON lines, with OEP-41 defaults.
package eventgen

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"text/template"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/evtctl/evtctl/internal/cevent"
)

// Spec describes the events to make. String fields may hold Go templates, executed per
// event with .Seq (1, 2, …) and the helpers uuid, now, randInt MIN MAX and randChoice A B….
type Spec struct {
	Type    string
	Source  string
	ID      string // default: a UUID1, as OEP-41 asks
	Subject string
	Time    string // default: now, in UTC
	// Data is the event's data: JSON text when DataContentType is a JSON type (the
	// default), else any bytes, sent as they are (see cevent.IsTextData); "" for no data.
	// A template in data that is not UTF-8 is not one: such data is never executed.
	Data            string
	DataContentType string // default application/json when there is data
	Extensions      map[string]string
	// OEP-41 extensions, added unless Extensions sets them: minorversion 0, pii false.
	NoOEPDefaults bool
}

// Generator makes events from a Spec.
type Generator struct {
	spec  Spec
	tmpls map[string]*template.Template
	now   func() time.Time
	rng   *rand.Rand
}

// New compiles the templates in spec.
func New(spec Spec, now func() time.Time) (*Generator, error) {
	if now == nil {
		now = time.Now
	}
	g := &Generator{spec: spec, tmpls: map[string]*template.Template{}, now: now, rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))}
	funcs := template.FuncMap{
		"uuid": func() string { return newID() },
		"now":  func() string { return g.now().UTC().Format(time.RFC3339Nano) },
		"randInt": func(lo, hi int) (int, error) {
			if hi < lo {
				return 0, fmt.Errorf("randInt %d %d: the maximum is below the minimum", lo, hi)
			}
			return lo + g.rng.IntN(hi-lo+1), nil
		},
		"randChoice": func(choices ...string) (string, error) {
			if len(choices) == 0 {
				return "", fmt.Errorf("randChoice needs at least one choice")
			}
			return choices[g.rng.IntN(len(choices))], nil
		},
	}
	fields := map[string]string{"type": spec.Type, "source": spec.Source, "id": spec.ID, "subject": spec.Subject, "time": spec.Time, "data": spec.Data}
	for k, v := range spec.Extensions {
		fields["ext:"+k] = v
	}
	for name, text := range fields {
		if !strings.Contains(text, "{{") || !utf8.ValidString(text) {
			continue
		}
		t, err := template.New(name).Funcs(funcs).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("--%s template: %w", strings.TrimPrefix(name, "ext:"), err)
		}
		g.tmpls[name] = t
	}
	return g, nil
}

func newID() string {
	if u, err := uuid.NewUUID(); err == nil {
		return u.String()
	}
	return uuid.NewString()
}

func (g *Generator) field(name, value string, seq int) (string, error) {
	t, ok := g.tmpls[name]
	if !ok {
		return value, nil
	}
	var b strings.Builder
	if err := t.Execute(&b, struct{ Seq int }{seq}); err != nil {
		return "", fmt.Errorf("--%s template: %w", strings.TrimPrefix(name, "ext:"), err)
	}
	return b.String(), nil
}

// Event makes event number seq (from 1) in CloudEvents JSON format. Attribute values are
// checked by the caller (cevent) before anything is sent.
func (g *Generator) Event(seq int) ([]byte, error) {
	s := g.spec
	get := func(name, v string) (string, error) { return g.field(name, v, seq) }
	typ, err := get("type", s.Type)
	if err != nil {
		return nil, err
	}
	source, err := get("source", s.Source)
	if err != nil {
		return nil, err
	}
	id, err := get("id", s.ID)
	if err != nil {
		return nil, err
	}
	if id == "" {
		id = newID()
	}
	subject, err := get("subject", s.Subject)
	if err != nil {
		return nil, err
	}
	tm, err := get("time", s.Time)
	if err != nil {
		return nil, err
	}
	if tm == "" {
		tm = g.now().UTC().Format(time.RFC3339Nano)
	}
	data, err := get("data", s.Data)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"specversion":"1.0"`)
	writeAttr(&b, "id", id)
	writeAttr(&b, "source", source)
	writeAttr(&b, "type", typ)
	if subject != "" {
		writeAttr(&b, "subject", subject)
	}
	writeAttr(&b, "time", tm)
	exts := map[string]string{}
	for k, v := range s.Extensions {
		if v, err = get("ext:"+k, v); err != nil {
			return nil, err
		}
		exts[k] = v
	}
	if !s.NoOEPDefaults {
		if _, ok := exts["minorversion"]; !ok {
			exts["minorversion"] = "0"
		}
		if _, ok := exts["pii"]; !ok {
			exts["pii"] = "false"
		}
	}
	keys := make([]string, 0, len(exts))
	for k := range exts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(`,"` + k + `":`)
		b.Write(extensionValue(exts[k]))
	}
	if data != "" {
		ct := s.DataContentType
		if ct == "" {
			ct = "application/json"
		}
		writeAttr(&b, "datacontenttype", ct)
		if cevent.IsJSONMediaType(ct) {
			if !json.Valid([]byte(data)) {
				return nil, fmt.Errorf("--data is not valid JSON (event %d): %.60q; set --data-content-type for other data", seq, data)
			}
			var c bytes.Buffer
			_ = json.Compact(&c, []byte(data))
			b.WriteString(`,"data":`)
			b.Write(c.Bytes())
		} else if cevent.IsTextData(ct, []byte(data)) {
			// The text as it is: markup unescaped, as a node stores it from a binary request.
			b.WriteString(`,"data":`)
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(data)    // a string always encodes
			b.Truncate(b.Len() - 1) // Encode's newline
		} else {
			// Bytes that are not text, or not UTF-8: as they are, in base64.
			b.WriteString(`,"data_base64":"`)
			b.WriteString(base64.StdEncoding.EncodeToString([]byte(data)))
			b.WriteByte('"')
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// extensionValue writes an --ext value as JSON: true and false as booleans, integers (in
// their plain form, within CloudEvents' 32-bit range) as numbers, anything else as a string.
// So minorversion=0 and pii=false get the types OEP-41 gives them.
func extensionValue(v string) []byte {
	if v == "true" || v == "false" {
		return []byte(v)
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil && strconv.FormatInt(n, 10) == v {
		return []byte(v)
	}
	q, _ := json.Marshal(v)
	return q
}

func writeAttr(b *bytes.Buffer, name, value string) {
	q, _ := json.Marshal(value)
	b.WriteString(`,"` + name + `":`)
	b.Write(q)
}

// Complete completes a CloudEvent read from a JSON line — specversion "1.0", an id (UUID1)
// and a time (now) when they are missing (absent or null); other members are kept as they
// are — and returns what Inspect finds in the completed event. A complete line is returned
// as it is, not copied.
func Complete(line []byte, now time.Time) ([]byte, Line, error) {
	l, err := Inspect(line)
	if err != nil {
		return nil, Line{}, err
	}
	if l.Missing == 0 {
		return line, l, nil
	}
	ev := fill(line, l.Missing, now)
	l, err = Inspect(ev)
	return ev, l, err
}

// fill adds the members missing says are missing to the object line.
func fill(line []byte, missing int, now time.Time) []byte {
	if missing == 0 {
		return line
	}
	var b bytes.Buffer
	b.WriteByte('{')
	if missing&MissingSpecversion != 0 {
		b.WriteString(`"specversion":"1.0",`)
	}
	if missing&MissingID != 0 {
		writeMember(&b, "id", newID())
	}
	if missing&MissingTime != 0 {
		writeMember(&b, "time", now.UTC().Format(time.RFC3339Nano))
	}
	rest := bytes.TrimSpace(line)[1:] // after the object's opening brace
	if len(bytes.TrimSpace(rest)) > 0 && bytes.TrimSpace(rest)[0] == '}' {
		b.Truncate(b.Len() - 1) // no members followed: drop the trailing comma
	}
	b.Write(rest)
	return b.Bytes()
}

func writeMember(b *bytes.Buffer, name, value string) {
	q, _ := json.Marshal(value)
	b.WriteString(`"` + name + `":`)
	b.Write(q)
	b.WriteByte(',')
}
