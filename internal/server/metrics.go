package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/evtctl/evtctl/internal/eventlog"
)

// metrics uses its own registry, so that two servers in one process (tests) do not clash.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	ingested prometheus.Counter
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "evtctl_http_requests_total", Help: "HTTP requests by endpoint and status code.",
	}, []string{"endpoint", "code"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "evtctl_http_request_duration_seconds",
		Help:    "Time to answer HTTP requests by endpoint (long-polls include their wait).",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"endpoint"})
	m.ingested = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "evtctl_ingest_events_total", Help: "Events accepted by ingest, duplicates included.",
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.latency, m.ingested,
		&logCollector{s: s},
	)
	return m
}

func (m *metrics) handler() http.HandlerFunc {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP
}

type statusWriter struct {
	http.ResponseWriter
	code   int
	start  time.Time
	parked bool // the request's connection was parked: the parker counts it when it answers
}

// statusWriterOf finds the statusWriter under w.
func statusWriterOf(w http.ResponseWriter) *statusWriter {
	for {
		switch rw := w.(type) {
		case *statusWriter:
			return rw
		case interface{ Unwrap() http.ResponseWriter }:
			w = rw.Unwrap()
		default:
			return nil
		}
	}
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (m *metrics) instrument(name string, h http.Handler) http.Handler {
	lat := m.latency.WithLabelValues(name)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, start: start}
		h.ServeHTTP(sw, r)
		if sw.parked {
			return
		}
		lat.Observe(time.Since(start).Seconds())
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
	})
}

// logCollector reports the log's figures from one Stats call per scrape (a Stats call takes
// a snapshot of the log; one per figure would take seven).
type logCollector struct{ s *Server }

var logDescs = []struct {
	name, help string
	kind       prometheus.ValueType
	value      func(st eventlog.Stats, s *Server) float64
}{
	{"evtctl_log_appended_events_total", "Events appended to the log.", prometheus.CounterValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.Appended) }},
	{"evtctl_log_appended_bytes_total", "Bytes appended to the log, framing included.", prometheus.CounterValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.AppendedBytes) }},
	{"evtctl_log_duplicates_total", "Appends answered from the dedupe window.", prometheus.CounterValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.Duplicates) }},
	{"evtctl_log_items", "Items retained in the log.", prometheus.GaugeValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.Items) }},
	{"evtctl_log_bytes", "Bytes retained in the log.", prometheus.GaugeValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.Bytes) }},
	{"evtctl_log_segments", "Segment files of the log.", prometheus.GaugeValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.Segments) }},
	{"evtctl_log_dedupe_keys", "Keys remembered for duplicate suppression.", prometheus.GaugeValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.DedupeEntries) }},
	{"evtctl_waiting_readers", "Long-polls waiting for new events.", prometheus.GaugeValue, func(_ eventlog.Stats, s *Server) float64 { return float64(s.Waiters()) }},
	{"evtctl_log_damaged_ranges", "Ranges of the retained log lost to damage (a bad record, a missing or shortened file).", prometheus.GaugeValue, func(st eventlog.Stats, _ *Server) float64 { return float64(len(st.Damage)) }},
	{"evtctl_log_lost_events", "Events in the ranges lost to damage.", prometheus.GaugeValue, func(st eventlog.Stats, _ *Server) float64 { return float64(st.Lost) }},
	{"evtctl_log_unwritable", "1 while appends are refused for a passing reason (a full disk), else 0.", prometheus.GaugeValue, func(_ eventlog.Stats, s *Server) float64 {
		if s.unwritable() != nil {
			return 1
		}
		return 0
	}},
	{"evtctl_http_request_body_bytes", "Bytes of request bodies held, being received or handled.", prometheus.GaugeValue, func(_ eventlog.Stats, s *Server) float64 { return float64(s.bodies.n.Load() + s.rpcBody.n.Load()) }},
	{"evtctl_streams", "Streams (GET /events/stream) being served.", prometheus.GaugeValue, func(_ eventlog.Stats, s *Server) float64 { return float64(s.streams.Load()) }},
	{"evtctl_parked_connections", "Connections held out of net/http: long-polls waiting, and connections between requests.", prometheus.GaugeValue, func(_ eventlog.Stats, s *Server) float64 { return float64(s.Parked()) }},
}

// descs are built once, in logDescs' order.
var descs = func() []*prometheus.Desc {
	out := make([]*prometheus.Desc, len(logDescs))
	for i, d := range logDescs {
		out[i] = prometheus.NewDesc(d.name, d.help, nil, nil)
	}
	return out
}()

func (c *logCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range descs {
		ch <- d
	}
}

func (c *logCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.cfg.Store.Stats()
	for i, d := range logDescs {
		ch <- prometheus.MustNewConstMetric(descs[i], d.kind, d.value(st, c.s))
	}
}
