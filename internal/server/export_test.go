package server

import (
	"net"
	"net/http"
	"sync/atomic"

	"github.com/evtctl/evtctl/internal/parker"
	"github.com/evtctl/evtctl/internal/rawpoll"
)

// QueuedReads is the number of connections whose requests wait in the parker's queue for a
// worker.
func QueuedReads(s *Server) int {
	pk := s.park.Load()
	if pk == nil {
		return 0
	}
	return pk.p.QueuedReads()
}

// AttachBreakable is Attach with a poller whose Wait fails, once brk is called, with the
// error given, at its next look (when something happens on a connection).
func AttachBreakable(s *Server, hs *http.Server, ln net.Listener) (l net.Listener, brk func(error)) {
	var fail atomic.Pointer[error]
	s.parkOnce.Do(func() {
		real, err := rawpoll.New()
		if err != nil {
			return
		}
		if pk := s.newParking(&breakablePoller{Poller: real, fail: &fail}); pk != nil {
			s.park.Store(pk)
		}
	})
	return s.Attach(hs, ln), func(err error) { fail.Store(&err) }
}

type breakablePoller struct {
	parker.Poller
	fail *atomic.Pointer[error]
}

func (b *breakablePoller) Wait(evs []rawpoll.Event) (int, error) {
	n, err := b.Poller.Wait(evs)
	if e := b.fail.Load(); e != nil && err == nil {
		return 0, *e
	}
	return n, err
}
