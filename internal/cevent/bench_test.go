package cevent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
)

// benchEvent returns a realistic ~500-byte structured event (OEP-41 style).
func benchEvent(i int) string {
	return fmt.Sprintf(`{"specversion":"1.0","type":"org.openedx.learning.student.registration.completed.v1",`+
		`"source":"openedx/lms/web","id":"b3b3981e-7544-11ea-b663-%012d","time":"2020-02-23T09:43:18.123456Z",`+
		`"datacontenttype":"application/json","minorversion":0,"sourcehost":"lms-1.example.com",`+
		`"data":{"user":{"id":%d,"is_active":true,"pii":{"username":"learner%d","email":"learner%d@example.com","name":"Ada Learner"}},`+
		`"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","start":null},"mode":"audit"}}`, i, i, i, i)
}

func benchBatch(n int) []byte {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(benchEvent(i))
	}
	b.WriteByte(']')
	return []byte(b.String())
}

func BenchmarkDecodeBatch(b *testing.B) {
	const n = 100
	body := benchBatch(n)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		evs, err := DecodeBatch(body, Limits{})
		if err != nil || len(evs) != n {
			b.Fatal(err, len(evs))
		}
	}
	// Process CPU time (including the garbage collector) per event; unlike
	// ns/event it does not grow when other processes compete for the CPU.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/event")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	b.ReportMetric(float64(len(body))/n, "bytes/event")
}

func BenchmarkDecodeStructured(b *testing.B) {
	body := []byte(benchEvent(1))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := DecodeStructured(body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

func BenchmarkDecodeBinary(b *testing.B) {
	h := http.Header{}
	h.Set("Ce-Specversion", "1.0")
	h.Set("Ce-Id", "b3b3981e-7544-11ea-b663-acde48001122")
	h.Set("Ce-Source", "openedx/lms/web")
	h.Set("Ce-Type", "org.openedx.learning.student.registration.completed.v1")
	h.Set("Ce-Time", "2020-02-23T09:43:18.123456Z")
	h.Set("Ce-Sourcehost", "lms-1.example.com")
	h.Set("Content-Type", "application/json")
	body := []byte(`{"user":{"id":1234,"is_active":true,"pii":{"username":"learner42","email":"learner42@example.com","name":"Ada Learner"}},` +
		`"course":{"course_key":"course-v1:edX+DemoX+Demo_Course","display_name":"Demonstration Course"},"mode":"audit"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := DecodeBinary(h, body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkDecodeBinaryEncoded is BenchmarkDecodeBinary with header values
// that need decoding: percent-escapes and a quoted-string.
func BenchmarkDecodeBinaryEncoded(b *testing.B) {
	h := http.Header{}
	h.Set("Ce-Specversion", "1.0")
	h.Set("Ce-Id", "b3b3981e-7544-11ea-b663-acde48001122")
	h.Set("Ce-Source", "openedx/lms/web")
	h.Set("Ce-Type", "org.openedx.learning.student.registration.completed.v1")
	h.Set("Ce-Time", "2020-02-23T09:43:18.123456Z")
	h.Set("Ce-Subject", "course-v1%3AedX%2BDemoX%2BDemo%20Course%20%E2%80%94%20%C3%A9t%C3%A9")
	h.Set("Ce-Sourcehost", `"lms-1.example.com"`)
	h.Set("Content-Type", "application/json")
	body := []byte(`{"user":{"id":1234,"is_active":true},"mode":"audit"}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		if _, err := DecodeBinary(h, body, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}

// BenchmarkReferenceJSONValid measures encoding/json's json.Valid on the
// same batch, as a yardstick for BenchmarkDecodeBatch on a given machine.
func BenchmarkReferenceJSONValid(b *testing.B) {
	const n = 100
	body := benchBatch(n)
	b.SetBytes(int64(len(body)))
	cpu0 := processCPU()
	for b.Loop() {
		if !json.Valid(body) {
			b.Fatal("invalid")
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/event")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkReferenceSDKUnmarshal measures unmarshalling the same events
// with sdk-go, the obvious alternative.
func BenchmarkReferenceSDKUnmarshal(b *testing.B) {
	const n = 100
	evs := make([][]byte, n)
	size := 0
	for i := range evs {
		evs[i] = []byte(benchEvent(i))
		size += len(evs[i])
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		for _, js := range evs {
			var e event.Event
			if err := json.Unmarshal(js, &e); err != nil {
				b.Fatal(err)
			}
			if err := e.Validate(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*n), "cpu-ns/event")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// kafkaBenchAttrs are the attributes of an Open edX event as its Kafka producer sends them
// (ce_ headers, the bare sourcehost), and kafkaBenchData its data, padded to 600 bytes.
func kafkaBenchAttrs(i int) ([]Attr, []byte) {
	attrs := []Attr{
		{Name: "type", Key: "ce_type", Value: "org.openedx.learning.course.enrollment.created.v1"},
		{Name: "id", Key: "ce_id", Value: fmt.Sprintf("b3b3981e-7544-11ea-b663-%012d", i)},
		{Name: "source", Key: "ce_source", Value: "openedx/lms/web"},
		{Name: "specversion", Key: "ce_specversion", Value: "1.0"},
		{Name: "time", Key: "ce_time", Value: "2026-02-23T09:43:18.123456Z"},
		{Name: "sourcehost", Key: "sourcehost", Value: "lms-1.example.com"},
	}
	v := fmt.Appendf(nil, `{"user":{"id":%d,"is_active":true},"course":{"course_key":"course-v1:edX+DemoX+Demo_Course"},"mode":"audit","pad":"`, i)
	for len(v) < 598 {
		v = append(v, 'x')
	}
	return attrs, append(v, `"}`...)
}

// BenchmarkDecodeAttrs decodes the events of one Kafka producer one after another, as a
// reader of a topic does: the attributes repeat but for id.
func BenchmarkDecodeAttrs(b *testing.B) {
	const n = 64
	attrs, data := make([][]Attr, n), make([][]byte, n)
	for i := range n {
		attrs[i], data[i] = kafkaBenchAttrs(i)
	}
	var d AttrDecoder
	buf := make([]byte, 0, 4096)
	b.SetBytes(int64(len(data[0])))
	b.ReportAllocs()
	cpu0 := processCPU()
	i := 0
	for b.Loop() {
		out, _, err := d.DecodeAppend(buf[:0], attrs[i%n], "application/json", true, data[i%n])
		if err != nil {
			b.Fatal(err)
		}
		buf = out
		i++
	}
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
}
