package redisstream

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// respOf writes entries as XRANGE answers them.
func respOf(entries ...rawEntry) string {
	var b strings.Builder
	bulk := func(s string) { b.WriteString("$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n") }
	b.WriteString("*" + strconv.Itoa(len(entries)) + "\r\n")
	for _, e := range entries {
		b.WriteString("*2\r\n")
		bulk(e.id)
		b.WriteString("*" + strconv.Itoa(2*len(e.fields)) + "\r\n")
		for _, f := range e.fields {
			bulk(f.name)
			bulk(f.value)
		}
	}
	return b.String()
}

func TestReadEntries(t *testing.T) {
	want := []rawEntry{
		{id: "1-0", fields: []field{{"type", "t"}, {"event_data", "\x00\r\n\xff"}}},
		{id: "1-1", fields: []field{{"a", ""}, {"a", "2"}}},
		{id: "2-0"},
	}
	got, fields, err := readEntries([]byte(respOf(want...)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(fields) != 4 {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i].id != want[i].id || len(got[i].fields) != len(want[i].fields) {
			t.Fatalf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
		for j := range want[i].fields {
			if got[i].fields[j] != want[i].fields[j] {
				t.Fatalf("entry %d field %d: %+v", i, j, got[i].fields[j])
			}
		}
	}
	// RESP3 sends the same, and a map of fields would be read alike.
	r3 := "*1\r\n*2\r\n$3\r\n5-0\r\n%1\r\n$1\r\nk\r\n$1\r\nv\r\n"
	if got, _, err := readEntries([]byte(r3), nil, nil); err != nil || len(got) != 1 || got[0].fields[0] != (field{"k", "v"}) {
		t.Fatalf("RESP3 map: %+v %v", got, err)
	}
	for _, null := range []string{"*-1\r\n", "_\r\n", "*0\r\n"} {
		if got, _, err := readEntries([]byte(null), nil, nil); err != nil || len(got) != 0 {
			t.Fatalf("%q: %+v %v", null, got, err)
		}
	}
	var se *ServerError
	if _, _, err := readEntries([]byte("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"), nil, nil); !errors.As(err, &se) || !strings.HasPrefix(se.Msg, "WRONGTYPE") {
		t.Fatalf("error reply: %v", err)
	}
	for _, bad := range []string{"", "*1\r\n", "*1\r\n*2\r\n$3\r\n1-0\r\n*1\r\n$1\r\na\r\n", "*1\r\n*2\r\n$9\r\n1-0\r\n*0\r\n", "+OK\r\n", "*1\r\n*3\r\n", "*0\r\nextra"} {
		if _, _, err := readEntries([]byte(bad), nil, nil); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}

// FuzzReadEntries checks that no reply makes the reader panic or read outside it, and that
// what it reads, written as XRANGE writes it, reads back the same.
func FuzzReadEntries(f *testing.F) {
	f.Add([]byte(respOf(rawEntry{id: "1-0", fields: []field{{"a", "b"}}})))
	f.Add([]byte("*1\r\n*2\r\n$3\r\n5-0\r\n%1\r\n$1\r\nk\r\n$1\r\nv\r\n"))
	f.Add([]byte("*-1\r\n"))
	f.Add([]byte("!5\r\nERR x\r\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, _, err := readEntries(b, nil, nil)
		if err != nil {
			return
		}
		again, _, err := readEntries([]byte(respOf(entries...)), nil, nil)
		if err != nil || len(again) != len(entries) {
			t.Fatalf("%q reads as %+v, which reads back as %+v, %v", b, entries, again, err)
		}
		for i := range entries {
			if again[i].id != entries[i].id || len(again[i].fields) != len(entries[i].fields) {
				t.Fatalf("entry %d: %+v reads back as %+v", i, entries[i], again[i])
			}
			for j := range entries[i].fields {
				if again[i].fields[j] != entries[i].fields[j] {
					t.Fatalf("entry %d: %+v reads back as %+v", i, entries[i], again[i])
				}
			}
		}
	})
}
