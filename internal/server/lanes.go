package server

import "context"

// Reads go in two lanes, so that what one read costs never decides whether another client
// is served:
//
//   - the quick lane (MaxReads slots): every read begins here, and a read without a filter,
//     or whose filter has done less than quickWork, stays here. Such a read takes little
//     time: its items are bounded by the reply's budget, its filter's work by quickWork.
//   - the scan lane (MaxScans slots): a filtered read that has done quickWork goes on here,
//     giving its quick slot back first. Costly scans wait for one another, not a cheap read
//     for them; with MaxScans at half the CPUs, they leave the others to everyone else.
//
// The cost of a read is known only as it runs, so a read's steps (readInto, the stream's)
// are sized to stay within quickWork while it is in the quick lane, and it changes lanes
// between steps.

// quickWork is the filter work (bytes of events examined times the filter's passes, as
// ScanBudget counts it) a read may do in the quick lane: about a hundredth of the default
// scan budget, some milliseconds of CPU for the costliest filter.
const quickWork = 15_000_000

// readSlot is the slot a read holds: in the quick lane, the scan lane, or none.
type readSlot struct {
	s    *Server
	lane chan struct{} // nil: none held
}

// take holds a slot in the lane for work done so far (spent) by a read with a filter
// (filtered), waiting for one, or until ctx ends. A read that holds a quick slot and must
// move gives it back first.
func (rs *readSlot) take(ctx context.Context, filtered bool, spent int64) error {
	lane := rs.s.reads
	if filtered && spent >= quickWork {
		lane = rs.s.scans
	}
	if rs.lane == lane {
		return nil
	}
	rs.release()
	select {
	case lane <- struct{}{}:
		rs.lane = lane
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// quick says whether the slot held is in the quick lane.
func (rs *readSlot) quick() bool { return rs.lane == rs.s.reads }

// release gives the slot back.
func (rs *readSlot) release() {
	if rs.lane != nil {
		<-rs.lane
		rs.lane = nil
	}
}

// stepBudget is the most records a filtered step may examine: as many as left (the scan
// budget) pays for if every record cost perRecord, within quickWork in the quick lane;
// at least one.
func (rs *readSlot) stepBudget(left, spent, perRecord int64) int {
	if rs.quick() {
		left = min(left, quickWork-spent)
	}
	return int(min(max(left/perRecord, 1), 1<<30))
}

// counter wraps a step's filter to count its work, yielding now and then in the scan lane.
func (rs *readSlot) counter(match func([]byte) bool, work int) *scanCount {
	return &scanCount{match: match, work: int64(max(work, 1)), yield: !rs.quick()}
}
