package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/evtctl/evtctl/internal/kafkatest"
)

// BenchmarkKafkaReplay measures reading a topic of Open edX CloudEvents (binary mode, JSON
// data, 3 partitions) from its start to its end, each reader a process of its own writing
// to /dev/null, against a Kafka-protocol broker (kfake) in this process:
//
//   - evtctl: the binary, evtctl replay --node kafka://…/TOPIC -o jsonl;
//   - franz-go: a plain consumer of the same client library (this test binary, as
//     kafkaPlainReader) that writes each record's value and a newline, unformatted;
//   - kcat -C -e -J, when installed.
//
// Each iteration is a round in which every reader reads the whole topic once, one after
// the other; the figures are medians over the rounds, the ratios the median of each
// round's ratio. EVTCTL_KAFKA_BENCH_RECORDS (default 1000000) is the topic's records,
// EVTCTL_KAFKA_BENCH_SIZE (default 600) a value's bytes; EVTCTL_KAFKA_BENCH_BASE, the path
// of another evtctl binary (a build of an earlier commit, say), measures it too, as
// "base". Run without -race:
//
//	go test -run '^$' -bench KafkaReplay -benchtime 5x ./cmd/evtctl/
func BenchmarkKafkaReplay(b *testing.B) {
	n := kafkatest.Env(b, "EVTCTL_KAFKA_BENCH_RECORDS", 1_000_000)
	size := kafkatest.Env(b, "EVTCTL_KAFKA_BENCH_SIZE", 600)
	dir, err := cliBin()
	if err != nil || dir == "" {
		b.Skipf("no evtctl binary to measure (%v)", err)
	}
	addr, err := kafkaBenchTopic(b, n, size)
	if err != nil {
		b.Fatal(err)
	}

	type reader struct {
		name  string
		cmd   func() *exec.Cmd
		rates []float64 // records a second, a round
		cpu   []float64 // µs of CPU a record, a round
	}
	readers := []*reader{
		{name: "evtctl", cmd: func() *exec.Cmd {
			return exec.Command(filepath.Join(dir, "evtctl"), "replay", "--node", "kafka://"+addr+"/measure", "-o", "jsonl")
		}},
		{name: "franz-go", cmd: func() *exec.Cmd {
			cmd := exec.Command(os.Args[0])
			cmd.Env = append(os.Environ(), "EVTCTL_TEST_KAFKA_PLAIN="+addr, "EVTCTL_TEST_KAFKA_PLAIN_N="+strconv.Itoa(n))
			return cmd
		}},
	}
	if base := os.Getenv("EVTCTL_KAFKA_BENCH_BASE"); base != "" {
		readers = append(readers, &reader{name: "base", cmd: func() *exec.Cmd {
			return exec.Command(base, "replay", "--node", "kafka://"+addr+"/measure", "-o", "jsonl")
		}})
	}
	if p, err := exec.LookPath("kcat"); err == nil {
		readers = append(readers, &reader{name: "kcat", cmd: func() *exec.Cmd {
			return exec.Command(p, "-C", "-b", addr, "-t", "measure", "-e", "-J", "-o", "beginning", "-q")
		}})
	} else {
		b.Log("kcat is not installed: measured without it")
	}
	ratios := make([][]float64, len(readers)) // evtctl's rate over each other reader's
	b.ResetTimer()
	for round := range b.N {
		line := fmt.Sprintf("round %d:", round+1)
		for _, rd := range readers {
			d, cpu, err := runToDevNull(rd.cmd())
			if err != nil {
				b.Fatalf("%s: %v", rd.name, err)
			}
			rd.rates = append(rd.rates, float64(n)/d.Seconds())
			rd.cpu = append(rd.cpu, float64(cpu.Nanoseconds())/1000/float64(n))
			line += fmt.Sprintf("  %s %.0f records/s, %.2f µs of CPU a record;", rd.name, rd.rates[round], rd.cpu[round])
		}
		b.Log(line) // one line a round: the testing package keeps only the first lines a benchmark logs
		for i := 1; i < len(readers); i++ {
			ratios[i] = append(ratios[i], readers[0].rates[round]/readers[i].rates[round])
		}
	}
	b.StopTimer()
	for i, rd := range readers {
		b.ReportMetric(median(rd.rates), rd.name+"-records/s")
		b.ReportMetric(median(rd.cpu), rd.name+"-cpu-µs/record")
		if i > 0 {
			b.ReportMetric(median(ratios[i]), "evtctl/"+rd.name)
			b.Logf("evtctl / %s: median %.2f× (rounds %.2f–%.2f)", rd.name, median(ratios[i]), slices.Min(ratios[i]), slices.Max(ratios[i]))
		}
	}
	b.ReportMetric(0, "ns/op") // a round's time says nothing
}

// runToDevNull runs cmd with its output to /dev/null: how long it took and the CPU it used.
// kafkaBenchTopic is the address of a broker in this process holding the topic
// "measure" of n records of size bytes, made once: the testing package calls a benchmark
// once with b.N 1 before it runs the rounds asked for.
func kafkaBenchTopic(b *testing.B, n, size int) (string, error) {
	kafkaBench.once.Do(func() {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "measure"))
		if err != nil {
			kafkaBench.err = err
			return
		}
		// The broker lives as long as this process: the benchmark is run more than once.
		addr := c.ListenAddrs()[0]
		t0 := time.Now()
		if err := kafkatest.Fill(context.Background(), addr, "measure", n, size, 3); err != nil {
			c.Close()
			kafkaBench.err = err
			return
		}
		b.Logf("filled %d records of %d B in %v", n, size, time.Since(t0).Round(time.Millisecond))
		kafkaBench.addr = addr
	})
	return kafkaBench.addr, kafkaBench.err
}

var kafkaBench struct {
	once sync.Once
	addr string
	err  error
}

func runToDevNull(cmd *exec.Cmd) (time.Duration, time.Duration, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return 0, 0, err
	}
	defer null.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = null, &stderr
	start := time.Now()
	err = cmd.Run()
	d := time.Since(start)
	if err != nil {
		return 0, 0, fmt.Errorf("%v\n%s", err, stderr.Bytes())
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return d, time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// kafkaPlainReader is the plain franz-go reader of BenchmarkKafkaReplay, in a process of
// its own (this test binary, started with EVTCTL_TEST_KAFKA_PLAIN): it reads the topic at
// addr to its end and writes each record's value and a newline to stdout. It returns the
// process's exit status.
func kafkaPlainReader(addr string) int {
	n, err := strconv.Atoi(os.Getenv("EVTCTL_TEST_KAFKA_PLAIN_N"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	err = kafkatest.ConsumePlain(context.Background(), addr, "measure", n, 3, func(v []byte) {
		w.Write(v)
		w.WriteByte('\n')
	})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
