package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
)

// MarshalJSON writes the report as one object: bench, partial, environment, parameters and
// figures (objects keyed by name, in the order measured, each {"value","unit"} and, for a
// figure with a target, "goal":{"op","value","met"}), and notes.
func (r *Report) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"bench":`)
	writeJSON(&b, r.Bench)
	b.WriteString(`,"partial":`)
	writeJSON(&b, r.Partial)
	b.WriteString(`,"environment":`)
	writeJSON(&b, r.Env)
	b.WriteString(`,"parameters":`)
	writeValues(&b, r.Params)
	b.WriteString(`,"figures":`)
	writeValues(&b, r.Figures)
	b.WriteString(`,"notes":`)
	notes := r.Notes
	if notes == nil {
		notes = []string{}
	}
	writeJSON(&b, notes)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSON appends v as JSON, without escaping <, > and & (">=" reads better than "\u003e=").
func writeJSON(b *bytes.Buffer, v any) {
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		b.WriteString("null")
		return
	}
	b.Write(bytes.TrimSuffix(out.Bytes(), []byte("\n")))
}

func writeValues(b *bytes.Buffer, vs []Value) {
	b.WriteByte('{')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		writeJSON(b, v.Name)
		b.WriteString(`:{"value":`)
		switch x := v.Value.(type) {
		case float64:
			b.WriteString(jsonNumber(x))
		default:
			writeJSON(b, x)
		}
		if v.Unit != "" {
			b.WriteString(`,"unit":`)
			writeJSON(b, v.Unit)
		}
		if g := v.Goal; g != nil {
			f, _ := v.Value.(float64)
			b.WriteString(`,"goal":{"op":`)
			writeJSON(b, g.Op)
			b.WriteString(`,"value":`)
			b.WriteString(jsonNumber(g.Value))
			b.WriteString(`,"met":`)
			writeJSON(b, g.Met(f))
			b.WriteByte('}')
		}
		b.WriteByte('}')
	}
	b.WriteByte('}')
}

// jsonNumber writes v with at most 6 significant digits after the point that matter here
// (microseconds in milliseconds); NaN and infinities, which JSON lacks, become 0.
func jsonNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "0"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(math.Round(v*1e6)/1e6, 'f', -1, 64)
}

// WriteJSON writes the report as one line of JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	js, err := r.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = w.Write(append(js, '\n'))
	return err
}

// WriteTable writes the report for people: the conditions, then an aligned table of the
// figures with their targets.
func (r *Report) WriteTable(w io.Writer) error {
	var b bytes.Buffer
	title := "evtctl bench " + r.Bench
	if r.Partial {
		title += "  (interrupted: partial results)"
	}
	fmt.Fprintln(&b, title)
	e := r.Env
	node := e.NodeURL + " (" + e.NodeKind
	if e.NodeVersion != "" {
		node += " " + e.NodeVersion
	}
	for _, s := range []string{e.Embedded, e.Durability} {
		if s != "" {
			node += ", " + s
		}
	}
	node += ")"
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "  node\t%s\n", node)
	machine := fmt.Sprintf("%s/%s, %d CPUs, GOMAXPROCS %d, %s, evtctl %s", e.GOOS, e.GOARCH, e.CPUs, e.GOMAXPROCS, e.GoVersion, e.EvtctlVersion)
	fmt.Fprintf(tw, "  machine\t%s\n", machine)
	run := fmt.Sprintf("%s, %.1f s", e.Started.Format("2006-01-02 15:04:05Z07:00"), e.ElapsedS)
	if e.LoadBefore != nil && e.LoadAfter != nil {
		run += fmt.Sprintf(", load average %.2f → %.2f", *e.LoadBefore, *e.LoadAfter)
	}
	fmt.Fprintf(tw, "  run\t%s\n", run)
	var ps []string
	for _, p := range r.Params {
		ps = append(ps, p.Name+" "+formatValue(p))
	}
	fmt.Fprintf(tw, "  parameters\t%s\n", strings.Join(ps, ", "))
	tw.Flush()
	fmt.Fprintln(&b)
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  FIGURE\tVALUE\tUNIT\tTARGET")
	for _, f := range r.Figures {
		v, _ := f.Value.(float64)
		target := ""
		if g := f.Goal; g != nil {
			op := map[string]string{">=": "≥", "<=": "≤"}[g.Op]
			met := "met"
			if !g.Met(v) {
				met = "NOT met"
			}
			target = fmt.Sprintf("%s %s %s", op, formatNumber(g.Value), met)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", f.Name, formatNumber(v), f.Unit, target)
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nnote: %s", n)
	}
	if len(r.Notes) > 0 {
		b.WriteByte('\n')
	}
	_, err := w.Write(b.Bytes())
	return err
}

func formatValue(v Value) string {
	f, ok := v.Value.(float64)
	if !ok {
		return fmt.Sprint(v.Value)
	}
	s := formatNumber(f)
	if v.Unit != "" {
		s += " " + v.Unit
	}
	return s
}

// formatNumber shows a figure with the precision that matters: whole numbers with thousands
// separators from 1,000 up, three significant digits or so below.
func formatNumber(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000 || v == math.Trunc(v):
		return group(int64(math.Round(v)))
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
