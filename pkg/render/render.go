// Package render writes event items as JSON lines, payloads, pretty lines, templates or field projections.
package render

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/template"
	"time"
	"unsafe"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/pkg/client"
)

// Options choose what a Renderer writes.
type Options struct {
	// Format is one of Formats(); "" means "jsonl".
	//
	//   - jsonl: each item exactly as the node sent it, compacted onto one line.
	//   - ce: the item's data alone (the CloudEvent, or a Tendermint item's data as is); JSON
	//     data of a type the CloudEvents Go SDK v2 does not read as JSON is written as
	//     data_base64, which it and every other reader read alike (see cevent.ForSDK).
	//   - data: the payload alone, one JSON value per line: the CloudEvent's "data" member;
	//     else its "data_base64" member as sent, a JSON string of base64 text (decoded bytes
	//     could hold newlines or be no text at all, and guessing would make lines ambiguous);
	//     else null. For an item that is no CloudEvent: data.value if present, else data.
	//   - pretty: one line per event for people (see Color).
	//   - template: Template executed per item.
	Format string
	// Template is text/template source, for Format "template". A newline is appended to
	// output that does not end in one; an item whose output is empty writes nothing, so a
	// template can skip items. Dot has .Cursor .Event .Raw (string), .Data (the item's data
	// decoded, numbers as json.Number: the CloudEvent), .CloudEvent (bool), the CloudEvent
	// attributes .ID .Type .Source .Subject .Time .DataContentType (strings, "" when absent
	// or not a CloudEvent), .Payload (the payload of the "data" format, decoded; data_base64
	// is decoded to bytes that print as text and marshal back to base64) and .CursorTime
	// (time.Time); a template that names another field of dot is refused, naming these.
	// Functions beside the built-in ones: json (compact; object keys sorted), pretty
	// (indented JSON), get PATH (a gjson path in the item's data, the CloudEvent, as a
	// string: get "data.title" is the event's data.title), item PATH (a gjson path in the
	// item as sent: item "cursor"), time LAYOUT (of an RFC 3339 string or a time.Time),
	// upper, lower, trunc N (runes; N < 0 keeps the end), default D (for nil, "", an empty
	// list or map). Values are written as they are, without the cleaning that pretty
	// applies.
	Template string
	// Fields are gjson paths projected from what the format prints (jsonl: the item; ce: the
	// CloudEvent; data: the payload). Each item becomes one JSON object whose keys are the
	// paths as given and whose values are the matched JSON, or null. Not with pretty or
	// template.
	Fields []string
	// JQ, when not nil, is run on the JSON value written for each item (after Fields), and
	// its results are written instead, one a line (see JQ.Append). Not with pretty or
	// template.
	JQ *JQ
	// Color adds ANSI colours to the pretty format. The caller decides (stdout is a
	// terminal and NO_COLOR is unset); no other format ever writes colour.
	Color bool
	// Width, when not nil, fits the pretty format to a terminal: it is asked for the
	// terminal's width in columns before the first line after New and after each Flush
	// (so once per batch, and a resized window is seen), and each line is then cut to
	// that width, with columns aligned and the time shortened to the local time of day.
	// A width <= 0 leaves lines unfitted, as when Width is nil.
	Width func() int
}

// Formats lists the names accepted in Options.Format.
func Formats() []string {
	return []string{"jsonl", "pretty", "ce", "data", "template"}
}

const bufSize = 64 << 10

// Renderer writes items to a buffered writer. It is not safe for concurrent use.
type Renderer struct {
	w       *bufio.Writer
	format  string
	color   bool
	fields  []field
	tmpl    *template.Template
	tstate  *tmplState
	line    []byte // the line being built, reused
	scratch []byte // a second reusable buffer
	jq      *JQ
	jqOut   []byte // what jq made of the line, reused

	// fitted pretty lines
	widthFn    func() int
	widthAsked bool   // widthFn was called since the last Flush
	lay        layout // the columns at the width last asked
	loc        *time.Location
	now        func() time.Time
	tbuf       [32]byte
}

// New returns a Renderer writing to w, or an error naming what is wrong with opts.
func New(w io.Writer, opts Options) (*Renderer, error) {
	format := cmp.Or(opts.Format, "jsonl")
	switch {
	case w == nil:
		return nil, errors.New("render: nil writer")
	case !slices.Contains(Formats(), format):
		return nil, fmt.Errorf("unknown output format %q (use one of %s)", format, strings.Join(Formats(), ", "))
	case format == "template" && opts.Template == "":
		return nil, errors.New("output format template needs a template")
	case format != "template" && opts.Template != "":
		return nil, fmt.Errorf("a template goes with output format template, not %s", format)
	case len(opts.Fields) > 0 && (format == "pretty" || format == "template"):
		return nil, fmt.Errorf("fields go with output formats jsonl, ce and data, not %s", format)
	case opts.JQ != nil && (format == "pretty" || format == "template"):
		return nil, fmt.Errorf("jq filters JSON: it goes with output formats jsonl, ce and data, not %s", format)
	}
	r := &Renderer{format: format, color: opts.Color, jq: opts.JQ, widthFn: opts.Width, loc: time.Local, now: time.Now}
	if format == "template" {
		if err := r.parseTemplate(opts.Template); err != nil {
			return nil, err
		}
	}
	if len(opts.Fields) > 0 {
		fs, err := compileFields(opts.Fields)
		if err != nil {
			return nil, err
		}
		r.fields = fs
	}
	r.w = bufio.NewWriterSize(w, bufSize)
	r.line = make([]byte, 0, 1024)
	return r, nil
}

// Item renders one item into the buffer. A write error of the underlying writer (when the
// buffer fills) is returned unchanged; any other error names the item's cursor.
func (r *Renderer) Item(it client.Item) error {
	switch r.format {
	case "ce":
		return r.ce(it)
	case "data":
		return r.data(it)
	case "pretty":
		return r.pretty(it)
	case "template":
		return r.template(it)
	}
	return r.jsonl(it)
}

// Items renders items in order, as Item renders each. JSON lines that lie one after another
// in memory, each followed by its newline — the items of an evtctl node's stream — are
// written as they lie, in one piece, when they need no compacting.
func (r *Renderer) Items(items []client.Item) error {
	if r.format != "jsonl" || r.fields != nil || r.jq != nil {
		for _, it := range items {
			if err := r.Item(it); err != nil {
				return err
			}
		}
		return nil
	}
	var span []byte // lines to write as they are
	for _, it := range items {
		raw := it.Raw
		n := len(raw)
		if n == 0 || cap(raw) == n || raw[:n+1][n] != '\n' || !it.Compact && !isCompact(bytesString(raw)) {
			if err := r.writeSpan(span); err != nil {
				return err
			}
			span = nil
			if err := r.Item(it); err != nil {
				return err
			}
			continue
		}
		line := raw[:n+1]
		if len(span) > 0 && cap(span)-len(span) >= len(line) && unsafe.SliceData(line) == unsafe.SliceData(span[len(span):cap(span)]) {
			span = span[:len(span)+len(line)]
			continue
		}
		if err := r.writeSpan(span); err != nil {
			return err
		}
		span = line
	}
	return r.writeSpan(span)
}

func (r *Renderer) writeSpan(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	_, err := r.w.Write(b)
	return err
}

// Flush writes what is buffered. It returns the writer's error unchanged, so that
// errors.Is(err, syscall.EPIPE) tells a reader that has gone.
func (r *Renderer) Flush() error {
	r.widthAsked = false
	return r.w.Flush()
}

// itemError is an error about one item's content, not about writing.
func itemError(it client.Item, err error) error {
	return fmt.Errorf("item %q: %w", it.Cursor, err)
}

// envelope is the item as the node sent it; an item built without Raw gets one built from
// its fields.
func (r *Renderer) envelope(it client.Item) []byte {
	if len(it.Raw) > 0 {
		return it.Raw
	}
	b := append(r.scratch[:0], `{"cursor":`...)
	b = appendJSONString(b, it.Cursor)
	b = append(b, `,"event":`...)
	b = appendJSONString(b, it.Event)
	b = append(b, `,"data":`...)
	b = append(b, orNull(it.Data)...)
	b = append(b, '}')
	r.scratch = b
	return b
}

func (r *Renderer) jsonl(it client.Item) error {
	return r.doc(it, r.envelope(it))
}

// ce writes the CloudEvent in the form that the CloudEvents Go SDK v2 reads as every other
// reader of the JSON format does (see cevent.ForSDK).
func (r *Renderer) ce(it client.Item) error {
	doc := orNull(it.Data)
	if _, changed := cevent.ForSDK(doc); changed {
		// data_base64 holds the data compact, as every other line does: the same bytes
		// however the node sent the event.
		c, err := appendCompact(r.scratch[:0], bytesString(doc))
		r.scratch = c
		if err != nil {
			return itemError(it, err)
		}
		doc, _ = cevent.ForSDK(c)
	}
	return r.doc(it, doc)
}

func (r *Renderer) data(it client.Item) error {
	ev := scanData(bytesString(it.Data))
	return r.doc(it, stringBytes(ev.payload()))
}

// doc writes doc compacted on one line, or the fields projected from it.
func (r *Renderer) doc(it client.Item, doc []byte) error {
	b := r.line[:0]
	var err error
	if r.fields != nil {
		b, err = appendFields(b, bytesString(doc), r.fields)
	} else {
		b, err = appendCompact(b, bytesString(doc))
	}
	r.line = b
	if err != nil {
		return itemError(it, err)
	}
	if r.jq != nil {
		return r.writeJQ(it, b)
	}
	return r.writeLine(b)
}

// writeJQ writes what r.jq makes of the JSON value doc; nothing when it fails.
func (r *Renderer) writeJQ(it client.Item, doc []byte) error {
	out, err := r.jq.Append(r.jqOut[:0], doc)
	r.jqOut = out
	if err != nil {
		return itemError(it, fmt.Errorf("jq: %w", err))
	}
	_, err = r.w.Write(out)
	return err
}

// writeLine writes b and a newline.
func (r *Renderer) writeLine(b []byte) error {
	b = append(b, '\n')
	r.line = b
	_, err := r.w.Write(b)
	return err
}

func orNull(b []byte) []byte {
	if len(b) == 0 {
		return nullJSON
	}
	return b
}
