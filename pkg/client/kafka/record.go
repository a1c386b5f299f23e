package kafka

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/evtctl/evtctl/internal/cevent"
	"github.com/evtctl/evtctl/pkg/filter"
)

// How a record becomes a CloudEvent (the item's data):
//
//   - Structured mode: a content-type header of application/cloudevents+json; the value is
//     the event in the JSON format.
//   - Binary mode (the Kafka protocol binding, and the Open edX producer): any ce_ header.
//     Attributes come from the ce_ headers, taken as they are (the binding encodes
//     nothing); the Open edX producer's bare sourcehost, minorversion and sourcelib headers
//     are extensions too (a ce_ header of the same name wins). datacontenttype is the
//     content-type header, else ce_datacontenttype. The value is the data: JSON as it is,
//     UTF-8 text as a string, anything else (Avro behind a schema registry's 5-byte
//     prefix, protobuf, bytes) as data_base64, byte for byte.
//   - A value that is a CloudEvent in the JSON format without any of these headers (a
//     producer that sets none): read as structured mode.
//   - Anything else, and a record in these modes that is not a valid event, is a
//     CloudEvent made from the record, flagged by the extension notcloudevent (why it is
//     none): id PARTITION/OFFSET, source kafka:TOPIC, type the topic, time the record's
//     timestamp, the extensions kafkatopic, kafkapartition, kafkaoffset, kafkakey (or
//     kafkakeybase64 for a key that is not text) and kafkaheaders (the headers as a JSON
//     array of [name, value] pairs, a value that is not text as {"base64": "…"}), and the
//     value as data as above (its content-type header, else JSON, text or bytes as it
//     looks). No record is dropped.

// Extension names of an event made from a record.
const (
	ExtNotCloudEvent  = "notcloudevent"
	ExtTopic          = "kafkatopic"
	ExtPartition      = "kafkapartition"
	ExtOffset         = "kafkaoffset"
	ExtKey            = "kafkakey"
	ExtKeyBase64      = "kafkakeybase64"
	ExtHeaders        = "kafkaheaders"
	mediaStructured   = "application/cloudevents+json"
	mediaOctetStream  = "application/octet-stream"
	mediaJSON         = "application/json"
	mediaText         = "text/plain; charset=utf-8"
	attrBufSize       = 16
	maxEventFromBytes = 256 << 20
)

// bareExtensions are the Open edX producer's attribute headers without the ce_ prefix.
var bareExtensions = [...]string{"sourcehost", "minorversion", "sourcelib"}

// limits bound the events made of records: Kafka records may be far larger than the events
// a node takes over HTTP.
var limits = cevent.Limits{MaxEventBytes: maxEventFromBytes}

// decoder turns records of one topic into items. It is not safe for concurrent use.
type decoder struct {
	topic  string
	source string // of events made from records
	ad     cevent.AttrDecoder
	attrs  []cevent.Attr
	from   []int // the header each of attrs comes from
	plan   *scanPlan
	missed int    // records scanned in full since plan was made
	doc    []byte // scratch: the attributes of a binary-mode record as a JSON object
	types  map[string]string
	mem    *arena // where items are made

	wrapFor   *matcher // the query whose answer for events made from records is wrapMatch
	wrapMatch bool
}

func newDecoder(topic string) *decoder {
	return &decoder{
		topic:  topic,
		source: "kafka:" + topic,
		ad:     cevent.AttrDecoder{Limits: limits},
		attrs:  make([]cevent.Attr, 0, attrBufSize),
		types:  map[string]string{},
		mem:    &arena{},
	}
}

// view is b as a string without copying: records are not written after kgo hands them
// over, and a string kept from one keeps its batch's memory alive, so only short-lived
// uses and the interned types below take views.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// header is what a record's headers say of its mode.
type header struct {
	ct, dct       string // content-type, ce_datacontenttype
	hasCT, hasDCT bool
	ctCount       int
	binary        bool // some ce_ header
}

// scan reads r's headers into d.attrs (views of the record's memory) and h.
func (d *decoder) scan(r *kgo.Record) header {
	if p := d.plan; p != nil && p.fits(r.Headers) {
		return p.apply(d, r.Headers)
	}
	h, ctAt, dctAt := d.scanAll(r.Headers)
	if d.missed++; d.plan == nil || d.missed >= planEvery {
		d.plan, d.missed = newScanPlan(r.Headers, d.attrs, d.from, h, ctAt, dctAt), 0
	}
	return h
}

// scanAll is scan without a plan: it also returns the indexes of the headers that give
// h.ct and h.dct (-1 for none).
func (d *decoder) scanAll(hs []kgo.RecordHeader) (h header, ctAt, dctAt int) {
	d.attrs, d.from = d.attrs[:0], d.from[:0]
	ctAt, dctAt = -1, -1
	var bare [len(bareExtensions)]int // index+1 in r.Headers
	for i := range hs {
		k := hs[i].Key
		v := view(hs[i].Value)
		switch {
		case len(k) > 3 && (k[0] == 'c' || k[0] == 'C') && (k[1] == 'e' || k[1] == 'E') && k[2] == '_':
			h.binary = true
			name := lowerASCII(k[3:])
			if name == "datacontenttype" {
				if !h.hasDCT {
					h.dct, h.hasDCT, dctAt = v, true, i
				}
				continue
			}
			d.attrs = append(d.attrs, cevent.Attr{Name: name, Key: k, Value: v})
			d.from = append(d.from, i)
		case cevent.EqualFold(k, "content-type"):
			h.ctCount++
			if !h.hasCT {
				h.ct, h.hasCT, ctAt = v, true, i
			}
		default:
			for j, name := range bareExtensions {
				if bare[j] == 0 && cevent.EqualFold(k, name) {
					bare[j] = i + 1
				}
			}
		}
	}
	if !h.binary {
		return h, ctAt, dctAt
	}
	for j, name := range bareExtensions {
		if bare[j] == 0 || d.hasAttr(name) {
			continue
		}
		hd := &hs[bare[j]-1]
		d.attrs = append(d.attrs, cevent.Attr{Name: name, Key: hd.Key, Value: view(hd.Value)})
		d.from = append(d.from, bare[j]-1)
	}
	return h, ctAt, dctAt
}

// A scanPlan is what scanAll made of a sequence of header keys: which header gives which
// attribute, the content type or ce_datacontenttype. What scanAll makes of headers depends
// on their keys alone (their values are only taken), so the records of a producer, which
// repeat the same keys in the same order, are read by the plan: the keys compared, the
// values taken.
type scanPlan struct {
	keys        []string      // the headers' keys, in order
	attrs       []cevent.Attr // names and keys; values are the record's
	from        []int         // the header of each attribute
	h           header        // but ct and dct
	ctAt, dctAt int
}

// planEvery is how many records are scanned in full, at most, before a plan is made
// for the last one's keys.
const planEvery = 16

func newScanPlan(hs []kgo.RecordHeader, attrs []cevent.Attr, from []int, h header, ctAt, dctAt int) *scanPlan {
	p := &scanPlan{keys: make([]string, len(hs)), attrs: make([]cevent.Attr, len(attrs)), from: slices.Clone(from), h: h, ctAt: ctAt, dctAt: dctAt}
	for i := range hs {
		p.keys[i] = strings.Clone(hs[i].Key)
	}
	for i, a := range attrs {
		p.attrs[i] = cevent.Attr{Name: strings.Clone(a.Name), Key: p.keys[from[i]]}
	}
	p.h.ct, p.h.dct = "", ""
	return p
}

// fits reports whether hs have the keys p is for.
func (p *scanPlan) fits(hs []kgo.RecordHeader) bool {
	if len(hs) != len(p.keys) {
		return false
	}
	for i := range hs {
		if hs[i].Key != p.keys[i] {
			return false
		}
	}
	return true
}

// apply is scanAll of hs, which fit p.
func (p *scanPlan) apply(d *decoder, hs []kgo.RecordHeader) header {
	d.attrs = append(d.attrs[:0], p.attrs...)
	for j, i := range p.from {
		d.attrs[j].Value = view(hs[i].Value)
	}
	h := p.h
	if p.ctAt >= 0 {
		h.ct = view(hs[p.ctAt].Value)
	}
	if p.dctAt >= 0 {
		h.dct = view(hs[p.dctAt].Value)
	}
	return h
}

func (d *decoder) hasAttr(name string) bool {
	for _, a := range d.attrs {
		if a.Name == name {
			return true
		}
	}
	return false
}

// contentType is the datacontenttype of a binary-mode record: content-type, else
// ce_datacontenttype.
func (h *header) contentType() (string, bool) {
	if h.hasCT {
		return h.ct, true
	}
	return h.dct, h.hasDCT
}

// itemPrefix appends the start of an item, {"cursor":"P/O","event":TYPE,"data":, and
// returns where the cursor's text and the type's JSON string lie in it.
func itemPrefix(b []byte, r *kgo.Record, typ string) (out []byte, cur, ev span) {
	b = append(b, `{"cursor":"`...)
	cur.start = len(b)
	b = appendCursor(b, r.Partition, r.Offset)
	cur.end = len(b)
	b = append(b, `","event":`...)
	ev.start = len(b)
	b = cevent.AppendJSONString(b, typ)
	ev.end = len(b)
	return append(b, `,"data":`...), cur, ev
}

type span struct{ start, end int }

// lineRaw is an item's JSON from its line (the JSON and a newline): the newline lies just
// past the item, within its capacity, so that items made one after another in an arena are
// JSON lines lying one after another in memory, which a renderer writes as they lie.
func lineRaw(line []byte) []byte { return line[: len(line)-1 : len(line)] }

// built is an item made from a record.
type built struct {
	raw       []byte // the whole item: {"cursor":…,"event":…,"data":…}
	cur, ev   span   // the cursor's text and the event's JSON string in raw
	dataStart int
	typ       string // the event's type; "" if ev's JSON string holds no escape (take it from raw)
	spaced    bool   // raw holds insignificant whitespace (JSON data as the record has it)
}

// build makes the item of record r, or reports ok false when m rejects its event.
func (d *decoder) build(r *kgo.Record, m *matcher) (it built, ok bool) {
	h := d.scan(r)
	ct, hasCT := h.contentType()
	switch {
	case h.hasCT && isStructured(h.ct):
		return d.structured(r, m, h)
	case h.binary:
		// Match on the headers first where the query allows: a record whose attributes
		// fail, as the event made from the record would, is not decoded at all.
		headerMatch := false
		if m.headers {
			d.doc = appendAttrDoc(d.doc[:0], d.attrs, ct, hasCT)
			headerMatch = m.q.MatchJSON(d.doc)
			if !headerMatch && !m.wrapMatches(d, r) {
				return built{}, false
			}
		}
		typ := ""
		for _, a := range d.attrs {
			if a.Name == "type" {
				typ = a.Value
				break
			}
		}
		if h.ctCount > 1 {
			return d.wrap(r, m, "the content-type header is given "+strconv.Itoa(h.ctCount)+" times")
		}
		// Room for the item: its start, then what the decoder reserves for the event.
		need := 80 + 6*len(typ) + 64 + len(ct) + len(r.Value)*4/3 + 2
		for _, a := range d.attrs {
			need += len(a.Name) + 2*len(a.Value) + 6
		}
		b, cur, ev := itemPrefix(d.mem.alloc(need), r, typ)
		start := len(b)
		out, e, err := d.ad.DecodeAppend(b, d.attrs, ct, hasCT, r.Value)
		if err != nil {
			return d.wrap(r, m, err.Error())
		}
		if e.Type != typ { // cannot be: values are taken as they are
			return d.wrap(r, m, "the event's type differs from its ce_type header")
		}
		if !m.all && !(m.headers && headerMatch) && !(!m.headers && m.q.MatchJSON(out[start:])) {
			return built{}, false
		}
		out = append(out, '}', '\n')
		d.mem.took(out)
		it = built{raw: lineRaw(out), cur: cur, ev: ev, dataStart: start, spaced: e.Spaced}
		it.typ = d.intern(typ, out[ev.start:ev.end])
		return it, true
	case looksStructured(r.Value) && (!hasCT || cevent.IsJSONMediaType(ct)):
		return d.structured(r, m, h)
	}
	return d.wrap(r, m, "no ce_ headers, and no content-type "+mediaStructured)
}

// intern returns typ when its JSON string js needs escapes (it must be kept apart), else
// "" (the item takes it from its raw text).
func (d *decoder) intern(typ string, js []byte) string {
	if len(js) == len(typ)+2 {
		return ""
	}
	if t, ok := d.types[typ]; ok {
		return t
	}
	t := strings.Clone(typ)
	if len(d.types) < 4096 {
		d.types[t] = t
	}
	return t
}

// structured decodes a record in structured mode.
func (d *decoder) structured(r *kgo.Record, m *matcher, h header) (built, bool) {
	mt, _, _ := strings.Cut(h.ct, ";")
	if h.hasCT && !cevent.EqualFold(strings.TrimSpace(mt), mediaStructured) {
		return d.wrap(r, m, "content-type "+strconv.Quote(h.ct)+" is not supported: structured mode is read in "+mediaStructured)
	}
	if h.ctCount > 1 {
		return d.wrap(r, m, "the content-type header is given "+strconv.Itoa(h.ctCount)+" times")
	}
	ev, err := cevent.DecodeStructured(r.Value, limits)
	if err != nil {
		return d.wrap(r, m, "structured mode: "+err.Error())
	}
	if !m.all && !m.q.MatchJSON(ev.JSON) {
		return built{}, false
	}
	b, cur, evs := itemPrefix(d.mem.alloc(80+6*len(ev.Type)+len(ev.JSON)), r, ev.Type)
	start := len(b)
	b = append(b, ev.JSON...)
	b = append(b, '}', '\n')
	d.mem.took(b)
	it := built{raw: lineRaw(b), cur: cur, ev: evs, dataStart: start, spaced: ev.Spaced}
	it.typ = d.intern(ev.Type, b[evs.start:evs.end])
	return it, true
}

// wrap makes the event of a record that is no CloudEvent (see the top of this file).
func (d *decoder) wrap(r *kgo.Record, m *matcher, why string) (built, bool) {
	js, spaced := d.wrapEvent(r, why)
	if !m.all && !m.q.MatchJSON(js) {
		return built{}, false
	}
	b, cur, evs := itemPrefix(d.mem.alloc(80+6*len(d.topic)+len(js)), r, d.topic)
	start := len(b)
	b = append(b, js...)
	b = append(b, '}', '\n')
	d.mem.took(b)
	it := built{raw: lineRaw(b), cur: cur, ev: evs, dataStart: start, spaced: spaced}
	it.typ = d.intern(d.topic, b[evs.start:evs.end])
	return it, true
}

// wrapEvent is the CloudEvent made from record r, in the JSON format, and whether it holds
// insignificant whitespace (the record's JSON value as it is).
func (d *decoder) wrapEvent(r *kgo.Record, why string) ([]byte, bool) {
	attrs := d.wrapAttrs(r, why)
	ct, hasCT := "", false
	for _, h := range r.Headers {
		if cevent.EqualFold(h.Key, "content-type") {
			ct, hasCT = string(h.Value), true
			break
		}
	}
	if !hasCT && len(r.Value) > 0 {
		ct, hasCT = sniff(r.Value), true
	}
	var ad cevent.AttrDecoder // no memo: these are rare, and their values vary
	ad.Limits = limits
	ev, err := ad.Decode(attrs, ct, hasCT, r.Value)
	if err != nil && ct != mediaOctetStream {
		// The record's own content-type does not fit its value (or is no media type):
		// the bytes then, as they are; the header is in kafkaheaders.
		ev, err = ad.Decode(attrs, mediaOctetStream, len(r.Value) > 0, r.Value)
	}
	if err != nil {
		// A value too large for any event: say what it was, without it.
		attrs = d.wrapAttrs(r, why+"; and its value of "+strconv.Itoa(len(r.Value))+" bytes is too large to show")
		ev, err = ad.Decode(attrs, "", false, nil)
	}
	if err != nil {
		// Cannot be: every attribute above is made valid. Still, show the record.
		b := append([]byte(`{"specversion":"1.0","id":"`), appendCursor(nil, r.Partition, r.Offset)...)
		b = append(b, `","source":`...)
		b = cevent.AppendJSONString(b, d.source)
		b = append(b, `,"type":`...)
		b = cevent.AppendJSONString(b, d.topic)
		b = append(b, `,"notcloudevent":`...)
		b = appendJSONClean(b, cleanText(err.Error()))
		return append(b, '}'), false
	}
	return ev.JSON, ev.Spaced
}

// wrapAttrs are the attributes of the event made from r.
func (d *decoder) wrapAttrs(r *kgo.Record, why string) []cevent.Attr {
	part := strconv.FormatInt(int64(r.Partition), 10)
	off := strconv.FormatInt(r.Offset, 10)
	attrs := []cevent.Attr{
		{Name: "specversion", Value: "1.0"},
		{Name: "id", Value: part + "/" + off},
		{Name: "source", Value: d.source},
		{Name: "type", Value: d.topic},
		{Name: ExtTopic, Value: d.topic},
		{Name: ExtPartition, Value: part},
		{Name: ExtOffset, Value: off},
		{Name: ExtNotCloudEvent, Value: cleanText(why)},
	}
	if !r.Timestamp.IsZero() {
		attrs = append(attrs, cevent.Attr{Name: "time", Value: r.Timestamp.UTC().Format(time.RFC3339Nano)})
	}
	if r.Key != nil {
		if cevent.ValidString(view(r.Key)) {
			attrs = append(attrs, cevent.Attr{Name: ExtKey, Value: string(r.Key)})
		} else {
			attrs = append(attrs, cevent.Attr{Name: ExtKeyBase64, Value: base64.StdEncoding.EncodeToString(r.Key)})
		}
	}
	if len(r.Headers) > 0 {
		attrs = append(attrs, cevent.Attr{Name: ExtHeaders, Value: string(appendHeadersJSON(nil, r.Headers))})
	}
	for i := range attrs {
		attrs[i].Key = attrs[i].Name
	}
	return attrs
}

// appendHeadersJSON appends headers as a JSON array of [name, value] pairs; a value that
// is not text is {"base64": "…"}, a null one null.
func appendHeadersJSON(b []byte, hs []kgo.RecordHeader) []byte {
	b = append(b, '[')
	for i, h := range hs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = appendJSONClean(b, strings.ToValidUTF8(h.Key, "\uFFFD"))
		b = append(b, ',')
		switch {
		case h.Value == nil:
			b = append(b, "null"...)
		case utf8.Valid(h.Value):
			b = appendJSONClean(b, view(h.Value))
		default:
			b = append(b, `{"base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, h.Value)
			b = append(b, `"}`...)
		}
		b = append(b, ']')
	}
	return append(b, ']')
}

// appendJSONClean appends s, valid UTF-8, as a JSON string in which every character a
// CloudEvents String may not hold is escaped (\u007f), so that the JSON text is one.
func appendJSONClean(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case cevent.ValidRune(r):
			b = utf8.AppendRune(b, r)
		default:
			r1, r2 := r, rune(-1)
			if r > 0xffff {
				r1, r2 = utf16.EncodeRune(r)
			}
			for _, u := range [2]rune{r1, r2} {
				if u >= 0 {
					b = append(b, '\\', 'u', hex[u>>12&0xf], hex[u>>8&0xf], hex[u>>4&0xf], hex[u&0xf])
				}
			}
		}
	}
	return append(b, '"')
}

// sniff chooses the datacontenttype of a value without one.
func sniff(v []byte) string {
	switch {
	case gjson.ValidBytes(v):
		return mediaJSON
	case isText(v):
		return mediaText
	}
	return mediaOctetStream
}

// isText reports whether b is UTF-8 text: no control characters but tab, CR and LF.
func isText(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' || c == 0x7f {
			return false
		}
	}
	return utf8.Valid(b)
}

// cleanText makes s a valid CloudEvents String.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Map(func(r rune) rune {
		if !cevent.ValidRune(r) {
			return ' '
		}
		return r
	}, s)
}

// isStructured reports whether the media type ct is application/cloudevents or one of its
// suffixes (+json, -batch+json), parameters and surrounding whitespace allowed.
func isStructured(ct string) bool {
	const prefix = "application/cloudevents"
	if ct != "" && ct[0] > ' ' && ct[0] < utf8.RuneSelf {
		// Nothing to trim before it (which the general case below decides): the type
		// starts with the prefix or is no such type. Most records' application/json is
		// told at its length.
		return len(ct) >= len(prefix) && cevent.EqualFold(ct[:len(prefix)], prefix)
	}
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.TrimSpace(mt)
	return len(mt) >= len("application/cloudevents") && cevent.EqualFold(mt[:len("application/cloudevents")], "application/cloudevents")
}

// looksStructured reports whether v may be a CloudEvent in the JSON format.
func looksStructured(v []byte) bool {
	d := bytes.TrimLeft(v, " \t\r\n")
	return len(d) > 0 && d[0] == '{' && bytes.Contains(d, []byte(`"specversion"`))
}

// appendAttrDoc appends the attributes of a binary-mode record as a JSON object: what the
// event holds but its data, when it decodes.
func appendAttrDoc(b []byte, attrs []cevent.Attr, ct string, hasCT bool) []byte {
	b = append(b, '{')
	for i, a := range attrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONText(b, a.Name)
		b = append(b, ':')
		b = appendJSONText(b, a.Value)
	}
	if hasCT {
		if len(attrs) > 0 {
			b = append(b, ',')
		}
		b = append(b, `"datacontenttype":`...)
		b = appendJSONText(b, ct)
	}
	return append(b, '}')
}

// appendJSONText appends s as a JSON string, invalid UTF-8 replaced.
func appendJSONText(b []byte, s string) []byte {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return cevent.AppendJSONString(b, s)
}

// matcher is a compiled query and what it needs of a record.
type matcher struct {
	src string
	q   *filter.Query
	all bool // the empty query
	// headers: the query tests attributes alone, which a binary-mode record's headers
	// give before its value is decoded.
	headers bool
	// wrapFixed: the query tests only attributes that are the same in every event made
	// from a record of the topic (a decoder then matches once: see wrapMatches).
	wrapFixed bool
}

// wrapFixedTags are the attributes of an event made from a record that are the same for
// every record of a topic.
var wrapFixedTags = map[string]bool{"specversion": true, "source": true, "type": true, "tm.event": true, ExtTopic: true}

// wrapPerRecordTags are the attributes of an event made from a record that its record's
// coordinates and time give (see wrapDoc).
var wrapPerRecordTags = map[string]bool{"id": true, "time": true, ExtPartition: true, ExtOffset: true}

func compileQuery(src string) (*matcher, error) {
	q, err := filter.Compile(src)
	if err != nil {
		return nil, err
	}
	m := &matcher{src: src, q: q, all: q.MatchesAll()}
	if m.all {
		return m, nil
	}
	m.headers, m.wrapFixed = true, true
	for _, t := range q.Tags() {
		switch {
		case t == "data" || t == "data_base64" || strings.HasPrefix(t, "data."):
			m.headers = false
		case wrapFixedTags[t]:
		case wrapPerRecordTags[t]:
			m.wrapFixed = false
		default:
			// Any other attribute: an event made from a record has none but its
			// notcloudevent, datacontenttype, key and headers, which need the record's
			// value or more work than a decode saves.
			switch t {
			case ExtNotCloudEvent, "datacontenttype", ExtKey, ExtKeyBase64, ExtHeaders:
				m.headers = false
			}
		}
	}
	return m, nil
}

// wrapMatches reports whether the event made from r (were r no CloudEvent) could match:
// evaluated from r's coordinates, for queries that headers can decide.
func (m *matcher) wrapMatches(d *decoder, r *kgo.Record) bool {
	if m.wrapFixed && d.wrapFor == m {
		return d.wrapMatch
	}
	ok := m.q.MatchJSON(d.wrapDoc(r))
	if m.wrapFixed {
		d.wrapFor, d.wrapMatch = m, ok // a matcher is shared by pages; a decoder is not
	}
	return ok
}

// wrapDoc is the attributes of the event made from r that compileQuery lets a query test
// before decoding.
func (d *decoder) wrapDoc(r *kgo.Record) []byte {
	b := append(d.doc[:0], `{"specversion":"1.0","id":"`...)
	b = appendCursor(b, r.Partition, r.Offset)
	b = append(b, `","source":`...)
	b = cevent.AppendJSONString(b, d.source)
	b = append(b, `,"type":`...)
	b = cevent.AppendJSONString(b, d.topic)
	b = append(b, `,"kafkatopic":`...)
	b = cevent.AppendJSONString(b, d.topic)
	b = append(b, `,"kafkapartition":"`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `","kafkaoffset":"`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	b = append(b, '"')
	if !r.Timestamp.IsZero() {
		b = append(b, `,"time":"`...)
		b = r.Timestamp.UTC().AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	d.doc = append(b, '}')
	return d.doc
}

func lowerASCII(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

var errClosed = errors.New("kafka: the source is closed")
