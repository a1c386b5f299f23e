package server

import (
	"net"
	"net/http"
	"sync/atomic"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// QueuedReads is the number of connections whose requests wait in the parker's queue for a
// worker.
func QueuedReads(s *Server) int {
	p := s.park.Load()
	if p == nil {
		return 0
	}
	return p.tasks.queuedReads()
}

// MaxQueuedReads is how many connections' requests the parker's queue holds.
const MaxQueuedReads = maxQueuedReads

// AttachBreakable is Attach with a poller whose Wait fails, once brk is called, with the
// error given, at its next look (when something happens on a connection).
func AttachBreakable(s *Server, hs *http.Server, ln net.Listener) (l net.Listener, brk func(error)) {
	var fail atomic.Pointer[error]
	s.parkOnce.Do(func() {
		real, err := rawpoll.New()
		if err != nil {
			return
		}
		s.park.Store(startParker(s, &breakablePoller{poller: real, fail: &fail}))
	})
	return s.Attach(hs, ln), func(err error) { fail.Store(&err) }
}

type breakablePoller struct {
	poller
	fail *atomic.Pointer[error]
}

func (b *breakablePoller) Wait(evs []rawpoll.Event) (int, error) {
	n, err := b.poller.Wait(evs)
	if e := b.fail.Load(); e != nil && err == nil {
		return 0, *e
	}
	return n, err
}
