package eventlog

import (
	"context"
	"errors"
	"os"
	"sort"
	"time"

	"github.com/evtctl/evtctl/pkg/cursor"
)

// Retention moves the low mark: items below it are gone for readers at once. Whole
// segments below it are closed and deleted later by the pruner, outside the lock, so
// appends never wait for file deletion.

// setLowLocked raises the low mark; l.mu must be held for writing.
func (l *Log) setLowLocked(v uint64) {
	v = min(v, l.committed+1)
	if v <= l.low {
		return
	}
	l.low = v
	if len(l.segs) > 1 && l.segs[0].count > 0 && l.segs[0].lastSeq() < v {
		select {
		case l.pruneC <- struct{}{}:
		default:
		}
	}
}

// applyCaps enforces the item and byte limits; l.mu must be held for writing (or the log
// not yet shared). It does no I/O.
func (l *Log) applyCaps() {
	if m := l.opts.MaxItems; m > 0 && l.committed >= l.low && l.committed-l.low+1 > m {
		l.setLowLocked(l.committed - m + 1)
	}
	if l.opts.MaxBytes <= 0 {
		return
	}
	excess := l.retainedBytesLocked() - l.opts.MaxBytes
	for _, s := range l.segs {
		if excess <= 0 {
			return
		}
		if s.count == 0 || s.lastSeq() < l.low {
			continue
		}
		startOff := s.start + bytesBefore(s, l.low)
		if remain := s.size - startOff; excess >= remain {
			excess -= remain
			l.setLowLocked(s.lastSeq() + 1)
			continue
		}
		target := startOff + excess
		b := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].off) >= target })
		if b == len(s.index) {
			l.setLowLocked(s.lastSeq() + 1)
		} else {
			l.setLowLocked(s.base + uint64(b)*blockRecords)
		}
		return
	}
}

// retainedBytesLocked counts the bytes of retained items (to block granularity), leaving
// out segments below the low mark that the pruner has not deleted yet.
func (l *Log) retainedBytesLocked() int64 {
	var total int64
	for _, s := range l.segs {
		if s.count > 0 && s.lastSeq() >= l.low {
			total += s.size - s.start - bytesBefore(s, l.low)
		}
	}
	return total
}

// applyWindow drops items older than the time window.
func (l *Log) applyWindow() error {
	if l.opts.Window <= 0 {
		return nil
	}
	cutoff := l.now().Add(-l.opts.Window).UnixNano()
	sn, err := l.snapshot()
	if err != nil {
		return err
	}
	defer sn.release()
	var newLow uint64
	switch {
	case len(sn.segs) == 0:
		return nil
	case sn.newest.TS < cutoff:
		newLow = sn.committed + 1
	default:
		p, err := sn.locate(cursor.New(cutoff-1, ^uint64(0), cursor.NodeWidth), true)
		if err != nil {
			return err
		}
		newLow = sn.seqAt(p)
		// Records lost to damage have no known time, only that they are not later than the
		// intact record after them: a lost range right before the first record kept (or at
		// the end, when the newest record is lost and has not expired) is kept too.
		if d := sn.damageBefore(newLow); d != nil && d.Last >= sn.low {
			if next, _ := sn.after(d); next == p {
				newLow = max(d.First, sn.low)
			}
		}
	}
	l.mu.Lock()
	l.setLowLocked(newLow)
	l.mu.Unlock()
	return nil
}

// pruner applies the time window every second and deletes segments wholly below the low
// mark. The newest segment is always kept: it carries the sequence and timestamp that new
// cursors continue from.
func (l *Log) pruner() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-l.quit:
			return
		case <-t.C:
			if err := l.applyWindow(); err != nil {
				l.log.Warn("eventlog: applying the retention window", "err", err)
			}
		case <-l.pruneC:
		}
		l.deleteDead()
	}
}

// deleteDead deletes the segments wholly below the low mark, and forgets the lost ranges
// below it. On disk the low-water mark moves first, durably: a crash between leaves files
// below the mark, which the next open sets aside and this deletes; the other way round, it
// would leave a log whose start is missing, reported as lost.
func (l *Log) deleteDead() {
	l.mu.RLock()
	low := l.low
	work := len(l.segs) > 1 && (l.segs[0].count == 0 || l.segs[0].lastSeq() < low) ||
		len(l.damage) > 0 && l.damage[0].Last < low
	l.mu.RUnlock()
	if !work {
		return
	}
	if l.lwm != nil {
		if err := l.lwm.set(low, 0, true); err != nil {
			if l.lwmErr == nil {
				l.log.Warn("eventlog: the low-water mark cannot be moved; segment files below it are kept until it can", "err", err)
			}
			l.lwmErr = err
			return
		}
		if l.lwmErr != nil {
			l.log.Info("eventlog: the low-water mark moves again")
			l.lwmErr = nil
		}
	}
	var dead []*segment
	l.mu.Lock()
	for len(l.segs) > 1 && (l.segs[0].count == 0 || l.segs[0].lastSeq() < low) {
		dead = append(dead, l.segs[0])
		l.segs = l.segs[1:]
	}
	// Lost ranges wholly below the low mark are gone with what retention dropped.
	i := 0
	for i < len(l.damage) && l.damage[i].Last < low {
		i++
	}
	l.damage = l.damage[i:]
	live := map[string]bool{}
	for _, s := range l.segs {
		live[s.path] = true // the pieces of a damaged file share it
	}
	l.mu.Unlock()
	for _, s := range dead {
		s.release()
		if s.path != "" && !live[s.path] {
			if err := os.Remove(s.path); err != nil && !os.IsNotExist(err) {
				l.log.Warn("eventlog: removing a pruned segment", "file", s.path, "err", err)
			}
			_ = os.Remove(idxPath(s.path))
		}
	}
}

// rebuildDedupe reloads the keys of the dedupe window from the log's tail, on open.
func (l *Log) rebuildDedupe() error {
	if l.opts.DedupeWindow < 0 || l.committed == 0 {
		return nil
	}
	sn, err := l.snapshot()
	if err != nil {
		return err
	}
	defer sn.release()
	if len(sn.segs) == 0 {
		return nil
	}
	now := l.now().UnixNano()
	from, err := sn.locate(cursor.New(now-int64(l.opts.DedupeWindow)-1, ^uint64(0), cursor.NodeWidth), true)
	if err != nil {
		return err
	}
	// No more than DedupeMax keys: skip to the last ones.
	var total uint64
	for si := len(sn.segs) - 1; si >= from.si && si >= 0; si-- {
		v := &sn.segs[si]
		lo := uint64(0)
		if si == from.si {
			lo = from.ri
		}
		if total+v.count-lo > uint64(l.opts.DedupeMax) {
			from = pos{si, v.count - (uint64(l.opts.DedupeMax) - total)}
			break
		}
		total += v.count - lo
	}
	err = sn.scanForward(context.Background(), from, sn.end(), func(r *rec) bool {
		l.dedupe.add(r.key, cursor.New(r.ts, r.seq, cursor.NodeWidth), r.ts)
		return true
	})
	var fe *frameError
	if errors.As(err, &fe) && l.fence(fe.seg) {
		// Damage in a segment opened from its index: fenced now; the keys of the
		// records around it are reloaded (adding one twice is harmless).
		if l.refences++; l.refences < 100 {
			return l.rebuildDedupe()
		}
	}
	return err
}
