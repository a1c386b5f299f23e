package bench

import (
	"math"
	"slices"
	"sync"
	"time"
)

// samples holds every measured duration and answers percentiles exactly.
//
// A bench here records at most a few million latencies (a 10 s ingest run acknowledges
// some 20,000 requests; 10,000 pollers × 5 rounds are 50,000 wakes), so keeping them all
// costs a few megabytes at most and gives exact percentiles and maximum without a
// histogram's bucket error or a dependency.
type samples struct {
	mu     sync.Mutex
	d      []time.Duration
	sorted bool
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.sorted = false
	s.mu.Unlock()
}

func (s *samples) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.d)
}

func (s *samples) sort() {
	if !s.sorted {
		slices.Sort(s.d)
		s.sorted = true
	}
}

// percentile returns the nearest-rank p-th percentile (0 < p <= 100); 0 without samples.
func (s *samples) percentile(p float64) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.d) == 0 {
		return 0
	}
	s.sort()
	rank := int(math.Ceil(p / 100 * float64(len(s.d))))
	return s.d[min(max(rank, 1), len(s.d))-1]
}

func (s *samples) max() time.Duration { return s.percentile(100) }
