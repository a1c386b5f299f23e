// Package kafkatest makes the Kafka records the measurements of reading a topic read: Open
// edX CloudEvents in the binary mode of that platform's producer, with JSON data.
package kafkatest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is record i of a topic of parts partitions: an Open edX enrollment event whose
// JSON value is size bytes, in partition i % parts.
func Record(i, size, parts int) *kgo.Record {
	v := fmt.Appendf(nil, `{"user":{"id":%d,"is_active":true},"course":{"course_key":"course-v1:edX+DemoX+Demo_Course"},"mode":"audit","pad":"`, i)
	for len(v) < size-2 {
		v = append(v, 'x')
	}
	v = append(v, `"}`...)
	return &kgo.Record{
		Partition: int32(i % parts),
		Key:       fmt.Appendf(nil, "user-%d", i%1000),
		Value:     v,
		Headers: []kgo.RecordHeader{
			{Key: "ce_type", Value: []byte("org.openedx.learning.course.enrollment.created.v1")},
			{Key: "ce_id", Value: fmt.Appendf(nil, "b3b3981e-7544-11ea-b663-%012d", i)},
			{Key: "ce_source", Value: []byte("openedx/lms/web")},
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_time", Value: []byte("2026-02-23T09:43:18.123456Z")},
			{Key: "sourcehost", Value: []byte("lms-1.example.com")},
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "ce_datacontenttype", Value: []byte("application/json")},
		},
	}
}

// Fill produces records 0 to n-1 (see Record) to topic, which has parts partitions, at the
// broker addr, and checks that the topic then holds n records.
func Fill(ctx context.Context, addr, topic string, n, size, parts int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(100000), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	errc := make(chan error, 1)
	for i := range n {
		cl.Produce(ctx, Record(i, size, parts), func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return err
	default:
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	if total != int64(n) {
		return fmt.Errorf("the topic holds %d records, want %d", total, n)
	}
	return nil
}

// ConsumePlain reads n records of topic (parts partitions) from their start with a plain
// franz-go consumer and calls write with each record's value: the least a reader does.
func ConsumePlain(ctx context.Context, addr, topic string, n, parts int, write func([]byte)) error {
	start := map[int32]kgo.Offset{}
	for p := range parts {
		start[int32(p)] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}))
	if err != nil {
		return err
	}
	defer cl.Close()
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if errs := fs.Errors(); len(errs) > 0 {
			return errs[0].Err
		}
		fs.EachRecord(func(r *kgo.Record) {
			write(r.Value)
			got++
		})
	}
	return nil
}

// Env is the positive number in the environment variable name of a measurement
// (EVTCTL_KAFKA_BENCH_RECORDS, say), or def when it is not set; anything else fails b.
func Env(b testing.TB, name string, def int) int {
	b.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: a positive number is wanted", name, v)
	}
	return n
}
