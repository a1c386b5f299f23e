package server_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/evtctl/evtctl/internal/eventlog"
	"github.com/evtctl/evtctl/internal/server"
)

// benchWaiters is how many long-polls BenchmarkWakeWaiters parks: EVTCTL_BENCH_WAITERS, or
// 2,000. Client and node share this process, so each waiter takes two open files here.
func benchWaiters(b *testing.B) int {
	if s := os.Getenv("EVTCTL_BENCH_WAITERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("EVTCTL_BENCH_WAITERS=%q: want a positive number", s)
		}
		return n
	}
	return 2000
}

// waitConn is one idle poller: a raw connection, so that the client side of the benchmark
// holds no goroutine and next to no memory, and the figures are the node's.
type waitConn struct {
	c  net.Conn
	br *bufio.Reader
}

// pollRequest is a long-poll as evtctl's client sends it: the first item after a cursor.
func pollRequest(id int, after string) []byte {
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"events","params":{"maxItems":1,"after":"` +
		after + `","waitTime":30000000000}}`
	return []byte("POST / HTTP/1.1\r\nHost: node\r\nUser-Agent: evtctl-bench\r\nContent-Type: application/json\r\n" +
		"Accept-Encoding: gzip\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// BenchmarkWakeWaiters parks many long-polls (one connection each, all after the same cursor,
// as idle pollers are), appends one event and times until every poller has its reply. It
// reports the node's memory per waiting poller: goroutine stacks (as they are, without a
// forced collection), live heap (after one; the pollers' connections, about 300 bytes each,
// included), and goroutines; and per wake the time and the CPU of the process, the pollers'
// reading of their replies included (cpu-ns/wake). "parked" serves
// as evtctl serve does (Server.Attach), "goroutine" as net/http alone does, each long-poll
// waiting in the goroutine of its request.
func BenchmarkWakeWaiters(b *testing.B) {
	b.Run("parked", func(b *testing.B) { benchmarkWakeWaiters(b, true) })
	b.Run("goroutine", func(b *testing.B) { benchmarkWakeWaiters(b, false) })
}

func benchmarkWakeWaiters(b *testing.B, parked bool) {
	waiters := benchWaiters(b)
	l, err := eventlog.Open(eventlog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	srv := server.New(server.Config{Store: l, MaxItems: 1000, MaxWaiters: waiters + 1000})
	var ln net.Listener
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		b.Fatal(err)
	}
	hs := srv.HTTPServer("", 0)
	if parked {
		ln = srv.Attach(hs, ln)
	}
	go func() { _ = hs.Serve(ln) }()
	defer func() {
		srv.Shutdown(context.Background())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}()

	appendOne := func(i int) string {
		res, err := l.Append(context.Background(), []eventlog.Entry{{
			Type: "com.example.bench.v1", Source: "/bench", ID: fmt.Sprintf("wake-%d", i),
			JSON: []byte(`{"specversion":"1.0","id":"wake-` + strconv.Itoa(i) +
				`","source":"/bench","type":"com.example.bench.v1","data":{"n":` + strconv.Itoa(i) + `}}`),
		}})
		if err != nil {
			b.Fatal(err)
		}
		return res[0].Cursor.String()
	}
	after := appendOne(-1)

	runtime.GC()
	var m0 runtime.MemStats
	runtime.ReadMemStats(&m0)
	g0 := runtime.NumGoroutine()

	conns := make([]waitConn, waiters)
	defer func() {
		for _, c := range conns {
			if c.c != nil {
				c.c.Close()
			}
		}
	}()
	for i := range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatalf("connection %d: %v", i, err)
		}
		conns[i] = waitConn{c: c} // its reader comes with its first reply, after the memory is measured
	}
	park := func() {
		for i, c := range conns {
			if _, err := c.c.Write(pollRequest(i, after)); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for srv.Waiters() != int64(waiters) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d long-polls waiting after a minute", srv.Waiters(), waiters)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// readAll reads every poller's reply, on as many goroutines as the node has CPUs, and
	// checks that each holds the appended event.
	readAll := func(want string) {
		var wg sync.WaitGroup
		errs := make(chan error, 1)
		workers := runtime.GOMAXPROCS(0)
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(conns); i += workers {
					if conns[i].br == nil {
						conns[i].br = bufio.NewReaderSize(conns[i].c, 1024)
					}
					resp, err := http.ReadResponse(conns[i].br, nil)
					if err == nil {
						var body []byte
						body, err = io.ReadAll(resp.Body)
						resp.Body.Close()
						if err == nil && (resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"cursor":"`+want+`"`))) {
							err = fmt.Errorf("HTTP %d %s", resp.StatusCode, body)
						}
					}
					if err != nil {
						select {
						case errs <- fmt.Errorf("poller %d: %w", i, err):
						default:
						}
						return
					}
				}
			}()
		}
		wg.Wait()
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
	}

	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		park()
		if i == 0 {
			var m1 runtime.MemStats
			runtime.ReadMemStats(&m1)
			g1 := runtime.NumGoroutine()
			runtime.GC()
			var m2 runtime.MemStats
			runtime.ReadMemStats(&m2)
			b.ReportMetric(float64(int64(m1.StackInuse)-int64(m0.StackInuse))/float64(waiters), "stack-B/waiter")
			b.ReportMetric(float64(int64(m2.HeapAlloc)-int64(m0.HeapAlloc))/float64(waiters), "heap-B/waiter")
			b.ReportMetric(float64(g1-g0)/float64(waiters), "goroutines/waiter")
		}
		b.StartTimer()
		c0 := cpuTime(b)
		after = appendOne(i)
		readAll(after)
		cpu += cpuTime(b) - c0
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(waiters), "ns/wake")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(waiters), "cpu-ns/wake")
}
