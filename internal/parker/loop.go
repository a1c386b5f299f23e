package parker

import (
	"runtime"
	"time"

	"github.com/evtctl/evtctl/internal/rawpoll"
)

// eventLoop reads the poller's events: it reads the input that comes on an idle connection
// and parks the calls it can without reading the log, leaving other requests to a worker; a
// hang-up of a waiting connection ends its call. It never waits for a worker, nor on the log.
// While replies wait for the workers, it gives way to them after each look (yield).
func (p *Parker) eventLoop(lw *worker) {
	defer p.loops.Done()
	evs := make([]rawpoll.Event, 256)
	var reads, gone []*conn
	for {
		n, err := p.poll.Wait(evs)
		if err != nil {
			if !p.closing.Load() {
				p.fail(err)
			}
			return
		}
		reads, gone = reads[:0], gone[:0]
		p.mu.Lock()
		for _, ev := range evs[:n] {
			slot := uint32(ev.Key)
			if int(slot) >= len(p.conns) {
				continue
			}
			pc := p.conns[slot]
			if pc == nil || pc.key() != ev.Key {
				continue // a connection since closed or handed back
			}
			if ev.In {
				pc.in.Store(true)
			}
			if ev.Hup {
				pc.hup.Store(true)
			}
			switch pc.state {
			case connParked:
				// Input while waiting is a pipelined request, read once the call is
				// answered; a hang-up ends the call.
				if ev.Hup {
					p.unparkLocked(pc)
					gone = append(gone, pc)
				}
			case connIdle:
				p.dl.remove(pc)
				pc.state = connBusy
				reads = append(reads, pc)
			}
		}
		p.mu.Unlock()
		for _, pc := range gone {
			p.hangUp(pc)
		}
		toWorkers := reads[:0] // filtered in place
		for _, pc := range reads {
			if lw.serve(pc) {
				toWorkers = append(toWorkers, pc)
			}
		}
		p.dispatchReads(toWorkers)
		reads = toWorkers
		p.yield()
	}
}

// yield lets the workers send the replies that wait for them before the event loop looks
// for more input: when a head moves, the calls it wakes are answered first, and the next
// long-polls of those answered, which come meanwhile, are read and parked after, rather than
// taking the processor from the replies still to send at each of the loop's turns beside the
// workers. It does not wait for a worker: it only puts the loop behind the goroutines ready
// to run, and with none ready (every worker stuck in a read of the log, or none busy) the
// loop goes on at once.
func (p *Parker) yield() {
	if p.tasks.repliesWaiting() {
		runtime.Gosched()
	}
}

// timerLoop ends the waits that run out and closes connections idle for too long.
func (p *Parker) timerLoop() {
	defer p.loops.Done()
	for {
		select {
		case <-p.dl.timer.C:
		case <-p.done:
			return
		}
		var waits, idles []*conn
		p.mu.Lock()
		for _, pc := range p.dl.due(time.Now()) {
			switch pc.state {
			case connParked:
				p.unparkLocked(pc)
				waits = append(waits, pc)
			case connIdle:
				pc.state = connBusy
				idles = append(idles, pc)
			}
		}
		p.mu.Unlock()
		for _, pc := range idles {
			p.close(pc)
		}
		p.dispatch(taskExpire, waits)
	}
}
