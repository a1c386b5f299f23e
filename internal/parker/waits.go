package parker

// waitList holds the calls waiting for a head to move: for the channel ch to close.
type waitList struct {
	ch   <-chan struct{}
	head *conn
	gone chan struct{} // closed when the list is given up before ch closes: its watcher ends
}

// park puts pc, whose call waits (Call.Waits), among the waiters until its head moves, its
// wait runs out or its client hangs up.
func (p *Parker) park(pc *conn) {
	p.mu.Lock()
	if !p.closed && !p.failed && !pc.hup.Load() {
		pc.state = connParked
		ch, due := pc.call.Waits()
		wl := p.lists[ch]
		if wl == nil {
			wl = &waitList{ch: ch, gone: make(chan struct{})}
			p.lists[ch] = wl
			p.loops.Add(1)
			go p.watch(wl)
		}
		pc.wl, pc.wprev, pc.wnext = wl, nil, wl.head
		if wl.head != nil {
			wl.head.wprev = pc
		}
		wl.head = pc
		p.dl.add(pc, due)
		p.mu.Unlock()
		return
	}
	answer := p.closed || p.failed
	p.mu.Unlock()
	if answer {
		// Nothing waits any more: the call is answered with what it has.
		(&worker{p: p}).expire(pc)
	} else {
		p.hangUp(pc)
	}
}

// unparkLocked takes pc off its wait list and deadline: its caller holds it.
func (p *Parker) unparkLocked(pc *conn) {
	if wl := pc.wl; wl != nil {
		if pc.wprev != nil {
			pc.wprev.wnext = pc.wnext
		} else {
			wl.head = pc.wnext
		}
		if pc.wnext != nil {
			pc.wnext.wprev = pc.wprev
		}
		pc.wl, pc.wprev, pc.wnext = nil, nil, nil
		if wl.head == nil && p.lists[wl.ch] == wl {
			delete(p.lists, wl.ch)
			close(wl.gone)
		}
	}
	p.dl.remove(pc)
	pc.state = connBusy
}

// takeListLocked takes every call off wl.
func (p *Parker) takeListLocked(wl *waitList, out []*conn) []*conn {
	for pc := wl.head; pc != nil; {
		next := pc.wnext
		pc.wl, pc.wprev, pc.wnext = nil, nil, nil
		p.dl.remove(pc)
		pc.state = connBusy
		out = append(out, pc)
		pc = next
	}
	wl.head = nil
	return out
}

// watch wakes the calls of wl once its head moves.
func (p *Parker) watch(wl *waitList) {
	defer p.loops.Done()
	select {
	case <-wl.ch:
	case <-wl.gone:
		return
	}
	var woken []*conn
	p.mu.Lock()
	if p.lists[wl.ch] == wl {
		delete(p.lists, wl.ch)
		woken = p.takeListLocked(wl, nil)
	}
	p.mu.Unlock()
	p.dispatch(taskWake, woken)
}

// hangUp ends the call of a connection whose client has gone, and closes it.
func (p *Parker) hangUp(pc *conn) {
	pc.call.HangUp()
	p.close(pc)
}
