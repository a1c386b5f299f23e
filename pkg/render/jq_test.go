package render

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
)

func mustJQ(t *testing.T, expr string) *JQ {
	t.Helper()
	q, err := CompileJQ(context.Background(), expr)
	if err != nil {
		t.Fatalf("CompileJQ(%q): %v", expr, err)
	}
	return q
}

func TestCompileJQErrors(t *testing.T) {
	for _, tc := range []struct {
		expr   string
		offset int
		msg    string
	}{
		{".data | {a", 10, "unexpected EOF"},
		{".a ]", 3, `unexpected token "]"`},
		{".a | select(.b == )", 18, `unexpected token ")"`},
		{"..a", 2, `unexpected token "a"`},
		{"nosuch(1)", -1, "function not defined: nosuch/1"},
		{".x as $v | $w", -1, "variable not defined: $w"},
	} {
		_, err := CompileJQ(context.Background(), tc.expr)
		var je *JQError
		if !errors.As(err, &je) || je.Offset != tc.offset || je.Expr != tc.expr || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("CompileJQ(%q) = %#v, want offset %d and %q", tc.expr, err, tc.offset, tc.msg)
		}
	}
}

func TestJQAppend(t *testing.T) {
	doc := `{"s":"a\tb \u001b","n":12345678901234567890,"f":1.50,"o":{"b":[1,2],"a":null},"t":true}`
	for _, tc := range []struct {
		expr, want string
	}{
		{".s", "a\tb \x1b\n"},                          // strings as their text
		{".n", "12345678901234567890\n"},               // numbers with their digits
		{".f, .n + 1", "1.50\n12345678901234567891\n"}, // arithmetic on big integers is exact
		{".o", `{"a":null,"b":[1,2]}` + "\n"},          // compact JSON, keys sorted
		{".o.b[]", "1\n2\n"},
		{".nope", "null\n"},
		{".t, [.s]", "true\n[\"a\\tb \\u001b\"]\n"},
		{"empty", ""},
		{"1, halt, 2", "1\n"},
		{`"<&>"`, "<&>\n"},
		{`{x: "<&>"}`, `{"x":"<&>"}` + "\n"},
	} {
		got, err := mustJQ(t, tc.expr).Append([]byte("kept:"), []byte(doc))
		if err != nil || string(got) != "kept:"+tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.expr, got, err, tc.want)
		}
	}
	got, err := mustJQ(t, `.t, .s.x`).Append(nil, []byte(doc))
	if err == nil || string(got) != "true\n" || !strings.Contains(err.Error(), "expected an object") {
		t.Errorf("a runtime error: %q, %v", got, err)
	}
	if _, err := mustJQ(t, ".").Append(nil, []byte(`{"a":`)); err == nil {
		t.Error("broken JSON taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q, err := CompileJQ(ctx, "repeat(1)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Append(nil, []byte("0")); !errors.Is(err, context.Canceled) {
		t.Errorf("an endless expression after its context ended: %v", err)
	}
}

// JQ on what each format writes: the item, the CloudEvent, the payload, a projection.
func TestRenderJQ(t *testing.T) {
	items := loadItems(t)
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Format: "jsonl", JQ: mustJQ(t, ".data.id? // .event")}, "a1\nb2\nc3\nd4\nTx\nNewBlockHeader\ne5\nf6\a\nNewRoundStep\nOdd\n5e9f5a4c-c8b1-11ee-a506-0242ac120002\n"},
		{Options{Format: "ce", JQ: mustJQ(t, "objects | select(.subject) | [.id, .subject]")}, "[\"a1\",\"course-v1:edX+DemoX\"]\n[\"b2\",\"course-v1:edX+DemoX\"]\n[\"c3\",\"user:42\"]\n[\"f6\\u0007\",\"abc\u202edef\"]\n[\"5e9f5a4c-c8b1-11ee-a506-0242ac120002\",\"学生:王小明\"]\n"},
		{Options{Format: "data", JQ: mustJQ(t, "(.user.id)? // empty")}, "42\n12345678901234567890\n"},
		{Options{Format: "jsonl", Fields: []string{"cursor", "data.type"}, JQ: mustJQ(t, `.["data.type"] | select(. != null) | ascii_upcase`)}, ""},
	} {
		got := render(t, tc.opts, items...)
		if tc.want != "" && got != tc.want {
			t.Errorf("%s %v: got\n%q\nwant\n%q", tc.opts.Format, tc.opts.Fields, got, tc.want)
		}
		if tc.want == "" && strings.Count(got, "\n") != 10 {
			t.Errorf("fields and jq: %q", got)
		}
	}
	for _, f := range []string{"pretty", "template"} {
		_, err := New(&bytes.Buffer{}, Options{Format: f, Template: map[bool]string{true: "x"}[f == "template"], JQ: mustJQ(t, ".")})
		if err == nil || !strings.Contains(err.Error(), "jq filters JSON") {
			t.Errorf("%s with jq: %v", f, err)
		}
	}
	// A failing item writes nothing and names the cursor; the next is written.
	var out bytes.Buffer
	r, err := New(&out, Options{JQ: mustJQ(t, ".data.data | keys[0]")})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Item(items[1]); err == nil || !strings.Contains(err.Error(), items[1].Cursor) || !strings.Contains(err.Error(), "jq: ") {
		t.Errorf("error %v", err)
	}
	if err := r.Item(items[0]); err != nil {
		t.Error(err)
	}
	if err := r.Flush(); err != nil || out.String() != "user\n" {
		t.Errorf("flush %v, output %q", err, out.String())
	}
}

func TestJQWriter(t *testing.T) {
	input := "{\"id\":\"a\"}\n\n{\"id\": 1}\n  \n{\"id\":[2]}\n"
	want := "a\n1\n[2]\n"
	// All at once, then a byte at a time: the same.
	var out bytes.Buffer
	w := mustJQ(t, ".id").Writer(&out)
	if n, err := w.Write([]byte(input)); err != nil || n != len(input) || out.String() != want {
		t.Errorf("at once: %d, %v, %q", n, err, out.String())
	}
	out.Reset()
	for i := range len(input) {
		if n, err := w.Write([]byte{input[i]}); err != nil || n != 1 {
			t.Fatalf("byte %d: %d, %v", i, n, err)
		}
	}
	if out.String() != want {
		t.Errorf("a byte at a time: %q", out.String())
	}
	// A runtime error fails the write, after the lines before it.
	out.Reset()
	_, err := w.Write([]byte("{\"id\":1}\n[1]\n{\"id\":3}\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "jq: ") || out.String() != "1\n" {
		t.Errorf("%v, %q", err, out.String())
	}
	// The writer's own error is returned as it is.
	w = mustJQ(t, ".").Writer(iotest.TruncateWriter(failing{}, 0))
	if _, err := w.Write([]byte("1\n")); err != nil {
		t.Errorf("a writer that takes nothing and fails not: %v", err)
	}
	w = mustJQ(t, ".").Writer(failing{})
	if _, err := w.Write([]byte("1\n")); !errors.Is(err, errFailing) {
		t.Errorf("the writer's error: %v", err)
	}
}

var errFailing = errors.New("failing")

type failing struct{}

func (failing) Write(p []byte) (int, error) { return 0, errFailing }
