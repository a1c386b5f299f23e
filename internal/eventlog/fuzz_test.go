package eventlog

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"testing"
)

// FuzzSegmentReader reads a segment file as opening a log does (openFile, changing nothing):
// the fuzzer's bytes as a whole file, and a file built from a plan — intact records, damaged
// ones and junk between them, over the fuzzer's bytes — in which every intact record must be
// found. Neither may panic, and what is read must be consistent: each piece of records reads
// back frame by frame as it says, pieces and lost ranges in order and apart.
func FuzzSegmentReader(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add(segHeader(1, 0), []byte{})
	f.Add(append(segHeader(7, 1), appendFrame(nil, 5, 7, key{}, flagCommit, "t", []byte(`{"a":1}`))...), []byte{})
	f.Add([]byte(`{"specversion":"1.0","id":"x"}`), []byte{1, 0, 4, 8, 1, 6, 3, 9, 0})
	f.Add([]byte{0xff, 0x00, 0x12, 0x34}, []byte{3, 1, 2, 2, 1, 7, 7, 5, 4, 2, 0, 1})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data, plan []byte) {
		if len(data) > 1<<16 || len(plan) > 256 {
			return
		}
		// The bytes as a whole file, first or last in the log, named for sequence number 1.
		for _, last := range []bool{false, true} {
			readSegment(t, dir, data, last, 1)
		}
		if len(plan) == 0 {
			return
		}
		checkPlan(t, dir, plan, data)
	})
}

// The plans the fuzzer starts from, and more, are read every run: a file of intact and damaged
// records and junk gives up every intact record.
func TestSegmentReaderFindsEveryIntactRecord(t *testing.T) {
	dir := t.TempDir()
	rnd := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for range 120 {
		plan := make([]byte, 1+rnd.IntN(120))
		for i := range plan {
			plan[i] = byte(rnd.IntN(256))
		}
		data := make([]byte, rnd.IntN(300))
		for i := range data {
			data[i] = byte(rnd.IntN(256))
		}
		if checkPlan(t, dir, plan, data) {
			checked++
		}
	}
	if checked < 100 {
		t.Fatalf("only %d of 120 plans could be checked", checked)
	}
}

// checkPlan builds a segment file from plan over data, reads it, and checks that every record
// left intact is read, no damaged one is, and every damaged one before the last intact one is
// in a lost range. It reports whether the file allowed the check (see checkable).
func checkPlan(t *testing.T, dir string, plan, data []byte) bool {
	t.Helper()
	file, recs := buildSegment(plan, data)
	found := readSegment(t, dir, file, false, recs.base)
	if !recs.checkable(file) {
		return false
	}
	if found == nil {
		t.Fatalf("a file of %d records was refused", len(recs.intact))
	}
	for seq, intact := range recs.intact {
		switch {
		case intact && !found.kept[seq]:
			t.Fatalf("intact record %d was not found", seq)
		case !intact && found.kept[seq]:
			t.Fatalf("damaged record %d was read", seq)
		case !intact && seq < recs.lastIntact && !found.lost[seq]:
			t.Fatalf("damaged record %d, before intact %d, is not in a lost range", seq, recs.lastIntact)
		}
	}
	for seq := range found.kept {
		if _, ok := recs.intact[seq]; !ok {
			t.Fatalf("record %d was read, which the file does not hold", seq)
		}
	}
	return true
}

// readResult is what readSegment found: the sequence numbers read, and those reported lost.
type readResult struct {
	kept, lost map[uint64]bool
}

// readSegment writes b as a segment file named for base and opens it as the log does, changing
// nothing; it checks what it read against the bytes. Nil when the file is refused.
func readSegment(t *testing.T, dir string, b []byte, last bool, base uint64) *readResult {
	t.Helper()
	path := segName(dir, base)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(path)
	of, err := openFile(path, last, 0, false, &noteLog{}, true)
	if err != nil {
		return nil // refused: not a segment
	}
	defer of.release()
	if of.stop > of.size || of.size > int64(len(b)) {
		t.Fatalf("stop %d, size %d of %d bytes", of.stop, of.size, len(b))
	}
	res := &readResult{kept: map[uint64]bool{}, lost: map[uint64]bool{}}
	var prev *segment
	for _, p := range of.pieces {
		if p.count == 0 {
			continue // the empty active segment of an empty file
		}
		if prev != nil && (p.base <= prev.lastSeq() || p.start < prev.size) {
			t.Fatalf("piece %d..%d at %d overlaps the one before, %d..%d to %d", p.base, p.lastSeq(), p.start, prev.base, prev.lastSeq(), prev.size)
		}
		off, ts := p.start, p.floorTS
		for k := range p.count {
			if off >= int64(len(b)) {
				t.Fatalf("piece %d..%d runs past the file", p.base, p.lastSeq())
			}
			r, err := decodeFrame(b[off:])
			if err != nil || r.seq != p.base+k || r.ts < ts {
				t.Fatalf("record %d of the piece from %d at %d: %v, seq %d, ts %d after %d", k, p.base, off, err, r.seq, r.ts, ts)
			}
			if k%blockRecords == 0 && p.index[k/blockRecords] != (indexEntry{ts: r.ts, off: uint32(off)}) {
				t.Fatalf("index entry %d of the piece from %d: %+v, want ts %d at %d", k/blockRecords, p.base, p.index[k/blockRecords], r.ts, off)
			}
			res.kept[r.seq] = true
			off, ts = off+int64(r.size), r.ts
		}
		if off != p.size || ts != p.lastTS || uint64(len(p.index)) != (p.count+blockRecords-1)/blockRecords {
			t.Fatalf("the piece from %d ends at %d (says %d), last ts %d (says %d), %d index entries", p.base, off, p.size, ts, p.lastTS, len(p.index))
		}
		prev = p
	}
	for i, d := range of.damage {
		if d.First > d.Last || i > 0 && d.First <= of.damage[i-1].Last {
			t.Fatalf("lost ranges out of order: %+v", of.damage)
		}
		for seq := d.First; seq <= d.Last && seq < d.First+1<<16; seq++ {
			if res.kept[seq] {
				t.Fatalf("record %d was read and is in the lost range %d..%d", seq, d.First, d.Last)
			}
			res.lost[seq] = true
		}
	}
	return res
}

// plannedRecords is what buildSegment put in a file: each record's sequence number, whether
// it was left intact, and where it starts.
type plannedRecords struct {
	base       uint64
	intact     map[uint64]bool
	starts     map[int64]bool // offsets of the intact records
	lastIntact uint64
}

// buildSegment builds a segment file from a plan, one step a byte: a record left intact, a
// record then damaged in place, or junk between records, with sizes and contents from data.
func buildSegment(plan, data []byte) ([]byte, *plannedRecords) {
	pr := &plannedRecords{base: 1 + uint64(plan[0])%1000, intact: map[uint64]bool{}, starts: map[int64]bool{}}
	ts := int64(binary.LittleEndian.Uint16(append([]byte{plan[0]}, 0)))
	b := segHeader(pr.base, ts)
	seq := pr.base
	take := func(n int) []byte {
		if len(data) == 0 {
			return make([]byte, n)
		}
		out := make([]byte, n)
		for i := range out {
			out[i] = data[(len(b)+i)%len(data)]
		}
		return out
	}
	for _, c := range plan[1:] {
		n := int(c >> 2)
		switch c % 4 {
		case 0, 1: // an intact record
			start := len(b)
			b = appendFrame(b, ts, seq, key{}, c&flagCommit, "org.example.fuzz.v1", take(n))
			pr.intact[seq], pr.starts[int64(start)], pr.lastIntact = true, true, seq
			seq++
		case 2: // a record, then damaged where it lies
			start := len(b)
			b = appendFrame(b, ts, seq, key{}, 0, "org.example.fuzz.v1", take(n))
			junk := take(len(b) - start)
			for i := range junk {
				b[start+i] ^= junk[i]
			}
			b[start+frameHeader+atSeq] ^= 0x80
			pr.intact[seq] = false
			seq++
		case 3: // junk between records
			b = append(b, take(n)...)
		}
		ts += int64(c & 3)
	}
	return b, pr
}

// checkable reports whether the property "every intact record is found" can be asked of the
// file: no frame reads back intact at an offset where no intact record was put (else the
// reader may take it for one of the log's, as it should), and every record left intact reads.
func (pr *plannedRecords) checkable(b []byte) bool {
	for off := int64(segHeaderSize); off < int64(len(b)); off++ {
		_, err := decodeFrame(b[off:])
		if (err == nil) != pr.starts[off] {
			return false
		}
	}
	return true
}
