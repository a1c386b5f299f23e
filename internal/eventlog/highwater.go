package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/evtctl/evtctl/internal/atomicfile"
)

// The high-water mark is the highest sequence number the log ever committed, with its
// timestamp, kept durably in a file of its own beside the segments. It is written after each
// group's records are durable and before they are acknowledged, so it is never below an
// acknowledged record and never above a durable one. On open it tells two things the
// segments cannot: records acknowledged and then lost with the end of the log (a deleted
// last segment, a file cut short or zeroed) are reported as lost rather than forgotten, and
// their sequence numbers are never handed out again.
//
// The file holds two slots written in turn, each with a counter and a checksum, so that a
// write torn by a crash leaves the other slot intact.

const (
	hwmName     = "HIGHWATER"
	hwmSlotSize = 32 // counter u64, seq u64, ts i64, reserved u32, crc32c u32
	hwmMagic    = "EVHW"
	hwmFileSize = 8 + 2*hwmSlotSize
)

// highWater is the open high-water mark file. Only the writer goroutine writes it.
type highWater struct {
	f       *os.File
	counter uint64
	seq     uint64
	ts      int64
}

// hwmRead reads the mark in dir: ok is false when there is no file (a log written before the
// mark existed, or a new one).
func hwmRead(dir string) (seq uint64, ts int64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, hwmName))
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	counter, seq, ts, ok := hwmDecode(b)
	if !ok {
		return 0, 0, false, fmt.Errorf("the high-water mark file %s is damaged: neither of its two copies is intact, so the highest sequence number this log handed out is unknown; run evtctl serve --verify --data-dir %s to see the state of the log, and remove the file only if losing that knowledge is acceptable", filepath.Join(dir, hwmName), dir)
	}
	_ = counter
	return seq, ts, true, nil
}

// hwmDecode returns the newer intact slot of a mark file.
func hwmDecode(b []byte) (counter, seq uint64, ts int64, ok bool) {
	if len(b) != hwmFileSize || string(b[:4]) != hwmMagic {
		return 0, 0, 0, false
	}
	le := binary.LittleEndian
	for i := range 2 {
		s := b[8+i*hwmSlotSize : 8+(i+1)*hwmSlotSize]
		if atomicfile.CRC32C(s[:hwmSlotSize-4]) != le.Uint32(s[hwmSlotSize-4:]) {
			continue
		}
		if c := le.Uint64(s); !ok || c > counter {
			counter, seq, ts, ok = c, le.Uint64(s[8:]), int64(le.Uint64(s[16:])), true
		}
	}
	return counter, seq, ts, ok
}

// hwmOpen opens (creating when missing) the mark file in dir, holding seq and ts.
func hwmOpen(dir string, seq uint64, ts int64) (*highWater, error) {
	path := filepath.Join(dir, hwmName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	h := &highWater{f: f}
	b := make([]byte, hwmFileSize)
	if n, _ := f.ReadAt(b, 0); n == hwmFileSize {
		if c, s, t, ok := hwmDecode(b); ok {
			h.counter, h.seq, h.ts = c, s, t
		}
	}
	if h.counter == 0 || h.seq != seq || h.ts != ts {
		// A new file, or one behind the segments: write both slots so that the file is
		// whole and holds the mark from the start.
		h.seq, h.ts = seq, ts
		copy(b, hwmMagic)
		for i := range 2 {
			h.counter++
			h.fill(b[8+i*hwmSlotSize:])
		}
		if _, err := f.WriteAt(b, 0); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
		if err := atomicfile.SyncDir(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	return h, nil
}

func (h *highWater) fill(s []byte) {
	le := binary.LittleEndian
	le.PutUint64(s, h.counter)
	le.PutUint64(s[8:], h.seq)
	le.PutUint64(s[16:], uint64(h.ts))
	le.PutUint32(s[24:], 0)
	le.PutUint32(s[28:], atomicfile.CRC32C(s[:hwmSlotSize-4]))
}

// set records a new mark in the older slot; with sync it is made durable before set returns.
func (h *highWater) set(seq uint64, ts int64, sync bool) error {
	if seq <= h.seq {
		return nil
	}
	h.counter++
	var s [hwmSlotSize]byte
	h.seq, h.ts = seq, ts
	h.fill(s[:])
	slot := int64(8 + (h.counter%2)*hwmSlotSize)
	if _, err := h.f.WriteAt(s[:], slot); err != nil {
		return err
	}
	if sync {
		return dataSync(h.f)
	}
	return nil
}

func (h *highWater) close() error {
	if h == nil {
		return nil
	}
	return h.f.Close()
}
