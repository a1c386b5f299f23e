package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/evtctl/evtctl/internal/swar"
	"github.com/evtctl/evtctl/pkg/client"
)

// randJSON writes a random JSON value with random insignificant whitespace (when spaced).
type randJSON struct {
	r      *rand.Rand
	spaced bool
	b      strings.Builder
}

func (g *randJSON) ws() {
	if !g.spaced {
		return
	}
	for range g.r.IntN(3) {
		g.b.WriteByte(" \t\n\r"[g.r.IntN(4)])
	}
}

func (g *randJSON) str() {
	pieces := []string{"a", " ", "  ", `\"`, `\\`, `\n`, `\u001b`, `\u00e9`, "é", "日本", `\/`, "\u2028", "\u009b", "{", "]", ":", ","}
	g.b.WriteByte('"')
	for range g.r.IntN(6) {
		g.b.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	g.b.WriteByte('"')
}

func (g *randJSON) value(depth int) {
	g.ws()
	k := g.r.IntN(8)
	if depth > 4 {
		k %= 4
	}
	switch k {
	case 0:
		g.str()
	case 1:
		nums := []string{"0", "-1", "1.50", "12345678901234567890", "1e-7", "2.0E+10", "-0.0"}
		g.b.WriteString(nums[g.r.IntN(len(nums))])
	case 2:
		g.b.WriteString([]string{"true", "false", "null"}[g.r.IntN(3)])
	case 3:
		g.b.WriteString("{}")
	case 4, 5:
		g.b.WriteByte('{')
		for i := range g.r.IntN(5) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.ws()
			g.str()
			g.ws()
			g.b.WriteByte(':')
			g.value(depth + 1)
		}
		g.ws()
		g.b.WriteByte('}')
	default:
		g.b.WriteByte('[')
		for i := range g.r.IntN(5) {
			if i > 0 {
				g.b.WriteByte(',')
			}
			g.value(depth + 1)
		}
		g.ws()
		g.b.WriteByte(']')
	}
	g.ws()
}

// randItem returns an item as a node might send it; data is a CloudEvent half the time.
func randItem(r *rand.Rand, spaced bool) string {
	g := &randJSON{r: r, spaced: spaced}
	g.b.WriteString(`{"cursor":`)
	g.ws()
	fmt.Fprintf(&g.b, `"%016x-%04x"`, r.Int64(), r.IntN(1<<16))
	g.b.WriteString(`,"event":`)
	g.str()
	g.b.WriteString(`,"data":`)
	ce := r.IntN(2) == 0
	if ce {
		g.b.WriteString(`{"specversion":"1.0","id":`)
		g.str()
		g.b.WriteString(`,"type":`)
		g.str()
		g.b.WriteString(`,"data":`)
	}
	g.value(0)
	if ce {
		g.b.WriteByte('}')
	}
	g.ws()
	g.b.WriteByte('}')
	return g.b.String()
}

func TestJSONLRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		src := randItem(r, i%2 == 1)
		var it client.Item
		if err := json.Unmarshal([]byte(src), &it); err != nil {
			t.Fatalf("generated item %q: %v", src, err)
		}
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(src)); err != nil {
			t.Fatal(err)
		}
		for _, format := range []string{"jsonl", "ce", "data"} {
			out := render(t, Options{Format: format}, it)
			line, ok := strings.CutSuffix(out, "\n")
			if !ok || strings.Contains(line, "\n") || !json.Valid([]byte(line)) {
				t.Fatalf("%s of %q: not one line of JSON: %q", format, src, out)
			}
			if format == "jsonl" && line != want.String() {
				t.Fatalf("jsonl of %q:\n got %s\nwant %s", src, line, want.String())
			}
		}
	}
}

// TestIsCompactRandom checks isCompact against json.Compact on valid JSON, and its
// eight-bytes-at-a-time path against the byte-at-a-time one on any bytes.
func TestIsCompactRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 5000 {
		g := &randJSON{r: r, spaced: i%3 == 0}
		g.value(0)
		doc := g.b.String()
		var c bytes.Buffer
		if err := json.Compact(&c, []byte(doc)); err != nil {
			t.Fatalf("generated %q: %v", doc, err)
		}
		if got, want := isCompact(doc), c.String() == doc; got != want {
			t.Fatalf("isCompact(%q) = %v, want %v", doc, got, want)
		}
	}
	const alphabet = "\"\\ a\x01\n"
	for range 20000 {
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		in := uint64(r.IntN(2)) * swar.MSB
		_, _, want := scanBytes(b, 0, len(b), in)
		if got := swarCompact(b, in); got != want {
			t.Fatalf("swarCompact(%q, %x) = %v, want %v", b, in, got, want)
		}
	}
}
