package render

import (
	"context"
	"encoding/json"
	"io"
	"testing"

	"github.com/evtctl/evtctl/pkg/client"
)

// benchItem is a typical OEP-41 item of about 700 bytes, as an evtctl node sends it.
const benchItem = `{"cursor":"18ea61a27c39abd8-00000000000000c7","event":"org.openedx.learning.course.enrollment.created.v1",` +
	`"data":{"specversion":"1.0","id":"5e9f5a4c-c8b1-11ee-a506-0242ac120002","source":"openedx/lms/web",` +
	`"type":"org.openedx.learning.course.enrollment.created.v1","time":"2026-11-22T10:00:00.123456Z",` +
	`"subject":"course-v1:edX+DemoX+Demo_Course","datacontenttype":"application/json","minorversion":0,` +
	`"sourcehost":"lms-7f9c5d8b4-x2k9p","sourcelib":[0,8,1],"data":{"enrollment":{"user":{"id":42,` +
	`"is_active":true,"pii":{"username":"edx_learner","email":"learner@example.com","name":"Ada Learner"}},` +
	`"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","display_name":"Demonstration Course",` +
	`"start":"2026-01-01T00:00:00Z","end":null},"mode":"audit","is_active":true,` +
	`"creation_date":"2026-11-22T09:59:59.987654Z","created_by":{"id":42}}}}}`

func benchRender(b *testing.B, opts Options) {
	var it client.Item
	if err := json.Unmarshal([]byte(benchItem), &it); err != nil {
		b.Fatal(err)
	}
	r, err := New(io.Discard, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(it.Raw)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := r.Item(it); err != nil {
			b.Fatal(err)
		}
		if i%100 == 99 { // a delivered batch
			if err := r.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := r.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
}

func BenchmarkJSONL(b *testing.B) { benchRender(b, Options{Format: "jsonl"}) }

func BenchmarkCE(b *testing.B) { benchRender(b, Options{Format: "ce"}) }

func BenchmarkData(b *testing.B) { benchRender(b, Options{Format: "data"}) }

func BenchmarkPretty(b *testing.B) { benchRender(b, Options{Format: "pretty", Color: true}) }

func BenchmarkPrettyFitted(b *testing.B) {
	benchRender(b, Options{Format: "pretty", Color: true, Width: func() int { return 120 }})
}

func BenchmarkTemplate(b *testing.B) {
	benchRender(b, Options{Format: "template", Template: `{{.Cursor}} {{.Type}} {{.Subject | default "-"}} {{.Payload.enrollment.user.id}}`})
}

func BenchmarkFields(b *testing.B) {
	benchRender(b, Options{Format: "jsonl", Fields: []string{"cursor", "data.type", "data.data.enrollment.user.id", "data.nope"}})
}

func BenchmarkJQ(b *testing.B) {
	q, err := CompileJQ(context.Background(), ".data.data.enrollment.user.id")
	if err != nil {
		b.Fatal(err)
	}
	benchRender(b, Options{Format: "jsonl", JQ: q})
}
