package tui

import (
	"strings"
	"testing"
	"time"
)

func plainLines(doc string, width int) string {
	return strings.Join(fitLines(formatJSON([]byte(doc)), width, func(_ tokClass, s string) string { return s }, wishCells), "\n")
}

func TestFormatJSON(t *testing.T) {
	for _, c := range []struct {
		name, doc, want string
		width           int
	}{
		{"nested", `{"a":1,"b":[true,null,{"c":"x"}],"d":{},"e":[]}`, `{
  "a": 1,
  "b": [
    true,
    null,
    {
      "c": "x"
    }
  ],
  "d": {},
  "e": []
}`, 80},
		{"order and text kept", `{"z":1.50,"a":"\u00e9\n","m":-0e1}`, `{
  "z": 1.50,
  "a": "\u00e9\n",
  "m": -0e1
}`, 80},
		{"scalar", `"just a string"`, `"just a string"`, 80},
		{"wrapped", `{"k":"abcdefghijklmnopqrstuvwxyz"}`, `{
  "k": "abcdefghi
    jklmnopqrstuv
    wxyz"
}`, 17},
		{"terminal controls made visible", "{\"k\":\"a\u009bb\u202ec\"}", `{
  "k": "a\u009bb\u202ec"
}`, 80},
		{"not JSON", "not {json\nsecond\x1b[31m", "not {json\nsecond\\u001b[31m", 80},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := plainLines(c.doc, c.width); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestFitLinesWideRunes(t *testing.T) {
	got := plainLines(`["日本語のテキスト"]`, 10)
	for _, l := range strings.Split(got, "\n") {
		if w := len([]rune(l)); w > 10 {
			t.Errorf("line %q is wider than 10", l)
		}
	}
	if !strings.Contains(strings.ReplaceAll(strings.ReplaceAll(got, "\n", ""), " ", ""), `"日本語のテキスト"`) {
		t.Errorf("text lost: %q", got)
	}
}

func TestCleanAndEvent(t *testing.T) {
	if got := clean("ok\x1b[2J\tline\nnext\u202e\xff"); got != `ok\u001b[2J\u0009line\u000anext\u202e`+"\ufffd" {
		t.Errorf("clean = %q", got)
	}
	f := newFakeLog()
	f.add(1, "evil.\x1b]52;c;AAAA\x07.type")
	ev := newEvent(f.items[0])
	if strings.ContainsAny(ev.typ, "\x1b\x07") || ev.cursor != fakeCursor(1) || string(ev.raw) != string(f.items[0].Raw) {
		t.Errorf("event %+v", ev)
	}
	if string(ev.data) != string(f.items[0].Data) || ev.time.IsZero() || ev.subject != "order-1" {
		t.Errorf("data %q time %v subject %q", ev.data, ev.time, ev.subject)
	}
	// An item that is no CloudEvent (a Tendermint node's) shows its event name and the
	// cursor's time.
	tm := newEvent(clientItem(fakeCursor(2), "Tx", `{"height":"5"}`))
	if tm.typ != "Tx" || tm.source != "" || tm.time.IsZero() || string(tm.raw) != `{"cursor":"`+fakeCursor(2)+`","event":"Tx","data":{"height":"5"}}` {
		t.Errorf("tendermint item: %+v raw %s", tm, tm.raw)
	}
	// An item whose cursor holds no time (a chain's) shows the time its source stamped it
	// with (its block's); without one, none.
	at := time.Date(2026, 11, 22, 13, 39, 11, 0, time.UTC)
	chain := clientItem("h000000000044.00000001", "Tx", `{"height":44}`)
	chain.Time = at
	if ev := newEvent(chain); !ev.time.Equal(at) {
		t.Errorf("a chain's item shows the time %v, want its block's %v", ev.time, at)
	}
	chain.Time = time.Time{}
	if ev := newEvent(chain); !ev.time.IsZero() {
		t.Errorf("an item without a time shows %v", ev.time)
	}
}
