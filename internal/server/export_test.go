package server

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
