package filter

import "testing"

// benchEvent is an OEP-41 enrollment event of about 500 bytes.
const benchEvent = `{"specversion":"1.0","id":"9f0c1a2e-5d4b-4c3a-8e7f-6a5b4c3d2e1f","source":"openedx/lms/web",` +
	`"type":"org.openedx.learning.course.enrollment.created.v1","time":"2026-11-22T10:00:00Z",` +
	`"datacontenttype":"application/json","minorversion":0,"data":{"enrollment":{"user":{"id":42,` +
	`"is_active":true,"pii":{"username":"ann","email":"ann@example.org","name":"Ann Example"}},` +
	`"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","display_name":"Demonstration Course",` +
	`"start":"2026-09-01T00:00:00Z"},"mode":"verified","is_active":true}}}`

const benchQuery = `type MATCHES 'org.openedx.learning.#' AND data.enrollment.user.id >= 42 AND time >= TIME 2026-11-01T00:00:00Z`

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(benchQuery); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMatchJSON(b *testing.B) {
	q := mustCompile(b, benchQuery)
	event := []byte(benchEvent)
	if !q.MatchJSON(event) {
		b.Fatal("no match")
	}
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		q.MatchJSON(event)
	}
}

func BenchmarkMatchTags(b *testing.B) {
	q := mustCompile(b, `tm.event = 'Tx' AND transfer.amount > 100 AND transfer.sender CONTAINS 'cosmos1'`)
	event := tags{
		"tm.event":           {"Tx"},
		"transfer.amount":    {"160stake"},
		"transfer.sender":    {"cosmos1crje20aj4gxdtyct7z3knxqry2jqt2fuaey6u5"},
		"transfer.recipient": {"cosmos1gu6y2a0ffteesyeyeesk23082c6998xyzmt9mz"},
	}.event()
	b.SetBytes(int64(len(event)))
	b.ReportAllocs()
	for b.Loop() {
		q.MatchJSON(event)
	}
}
