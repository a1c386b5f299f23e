package demo

import (
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/evtctl/evtctl/internal/lint"
)

func fixedClock() time.Time { return time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC) }

// Every event the demo sends passes lint cleanly: no errors and no warnings.
func TestEventsPassLint(t *testing.T) {
	g := New(1, fixedClock)
	evs := make([][]byte, 0, 600)
	for i := 0; i < 500; i++ {
		evs = append(evs, g.Next())
	}
	evs = append(evs, g.Burst(40)...)
	for _, ev := range evs {
		if fs := lint.Check(ev, lint.Options{}); len(fs) > 0 {
			t.Fatalf("lint findings %v for %s", fs, ev)
		}
	}
}

// Learners enroll in and buy only courses the catalog announced before, and every type
// of the demo shows up in a few hundred events.
func TestStoryHoldsTogether(t *testing.T) {
	g := New(7, fixedClock)
	created := map[string]bool{}
	seen := map[string]int{}
	for i := 0; i < 400; i++ {
		ev := g.Next()
		typ := gjson.GetBytes(ev, "type").String()
		seen[typ]++
		switch typ {
		case TypeCourseCreated:
			key := gjson.GetBytes(ev, "data.course_key").String()
			if created[key] {
				t.Fatalf("course %s created twice", key)
			}
			created[key] = true
		case TypeCourseUpdated:
			if !created[gjson.GetBytes(ev, "subject").String()] {
				t.Fatalf("update of a course never created: %s", ev)
			}
		case TypeEnrolled:
			if !created[gjson.GetBytes(ev, "data.course_key").String()] {
				t.Fatalf("enrollment in a course never created: %s", ev)
			}
			if !gjson.GetBytes(ev, "pii").Bool() {
				t.Fatalf("an enrollment names a learner, so pii must be true: %s", ev)
			}
		case TypePurchased:
			if !created[gjson.GetBytes(ev, "data.lines.0.course_key").String()] {
				t.Fatalf("order of a course never created: %s", ev)
			}
		default:
			t.Fatalf("unexpected type %q", typ)
		}
	}
	for _, typ := range Types {
		if seen[typ] == 0 {
			t.Errorf("no %s in 400 events: %v", typ, seen)
		}
	}
}

func TestBurst(t *testing.T) {
	g := New(3, fixedClock)
	b := g.Burst(25)
	if len(b) != 26 {
		t.Fatalf("burst of 25 made %d events, want the course and 25 more", len(b))
	}
	if typ := gjson.GetBytes(b[0], "type").String(); typ != TypeCourseCreated {
		t.Fatalf("a burst starts with the course's creation, got %s", typ)
	}
	key := gjson.GetBytes(b[0], "subject").String()
	for _, ev := range b[1:] {
		k := gjson.GetBytes(ev, "data.course_key").String()
		if k == "" {
			k = gjson.GetBytes(ev, "data.lines.0.course_key").String()
		}
		if k != key {
			t.Fatalf("burst event about %q, want the launched course %q", k, key)
		}
	}
}

func TestSeedRepeats(t *testing.T) {
	types := func(seed uint64) []string {
		g := New(seed, fixedClock)
		var out []string
		for i := 0; i < 50; i++ {
			out = append(out, gjson.GetBytes(g.Next(), "type").String())
		}
		return out
	}
	if !slices.Equal(types(5), types(5)) {
		t.Fatal("the same seed gave different sequences")
	}
	if slices.Equal(types(5), types(6)) {
		t.Fatal("different seeds gave the same 50 types")
	}
}

func TestIDsUnique(t *testing.T) {
	g := New(1, fixedClock)
	ids := map[string]bool{}
	for i := 0; i < 1000; i++ {
		id := gjson.GetBytes(g.Next(), "id").String()
		if ids[id] {
			t.Fatalf("id %s repeated", id)
		}
		ids[id] = true
	}
}
