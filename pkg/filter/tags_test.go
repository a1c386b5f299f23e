package filter

import (
	"slices"
	"testing"
)

func TestTags(t *testing.T) {
	for q, want := range map[string][]string{
		"":                                      nil,
		"type = 'a'":                            {"type"},
		"tm.event = 'a' AND data.x > 1":         {"tm.event", "data.x"},
		"(a EXISTS OR b = 'x') AND NOT a = 'y'": {"a", "b"},
		"sourcehost CONTAINS 'lms' AND data_base64 EXISTS": {"sourcehost", "data_base64"},
	} {
		c, err := Compile(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Tags(); !slices.Equal(got, want) {
			t.Errorf("Tags(%q) = %q, want %q", q, got, want)
		}
	}
}
