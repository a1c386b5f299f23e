package wordwrap

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

func TestLines(t *testing.T) {
	for _, tc := range []struct {
		text  string
		width int
		want  []string
	}{
		{"", 10, nil},
		{"  \n ", 10, nil},
		{"one two three", 7, []string{"one two", "three"}},
		{"one two three", 13, []string{"one two three"}},
		{"one\ntwo  three", 80, []string{"one two three"}},
		{"a longwordindeed b", 5, []string{"a", "longwordindeed", "b"}},
		{"café café café", 9, []string{"café café", "café"}},
	} {
		if got := Lines(tc.text, tc.width, utf8.RuneCountInString); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Lines(%q, %d) = %q, want %q", tc.text, tc.width, got, tc.want)
		}
	}
}
