package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
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
	st := s.cfg.Store
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.latency, m.ingested,
		counter("evtctl_log_appended_events_total", "Events appended to the log.", func() float64 { return float64(st.Stats().Appended) }),
		counter("evtctl_log_appended_bytes_total", "Bytes appended to the log, framing included.", func() float64 { return float64(st.Stats().AppendedBytes) }),
		counter("evtctl_log_duplicates_total", "Appends answered from the dedupe window.", func() float64 { return float64(st.Stats().Duplicates) }),
		gauge("evtctl_log_items", "Items retained in the log.", func() float64 { return float64(st.Stats().Items) }),
		gauge("evtctl_log_bytes", "Bytes retained in the log.", func() float64 { return float64(st.Stats().Bytes) }),
		gauge("evtctl_log_segments", "Segment files of the log.", func() float64 { return float64(st.Stats().Segments) }),
		gauge("evtctl_log_dedupe_keys", "Keys remembered for duplicate suppression.", func() float64 { return float64(st.Stats().DedupeEntries) }),
		gauge("evtctl_waiting_readers", "Long-polls waiting for new events.", func() float64 { return float64(s.Waiters()) }),
	)
	return m
}

func (m *metrics) handler() http.HandlerFunc {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}).ServeHTTP
}

type statusWriter struct {
	http.ResponseWriter
	code int
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
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		lat.Observe(time.Since(start).Seconds())
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(name, strconv.Itoa(code)).Inc()
	})
}
