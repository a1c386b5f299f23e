package server

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// chunkReader hands out src a few bytes at a time, and checks at each read that the memory
// counted in room stays within twice what it has handed out (or firstBodyRead).
type chunkReader struct {
	t     *testing.T
	src   []byte
	chunk int
	sent  int
	room  *bodyRoom
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if held := r.room.n.Load(); held > int64(max(firstBodyRead, 2*r.sent)) {
		r.t.Fatalf("%d bytes held after %d sent", held, r.sent)
	}
	if r.sent == len(r.src) {
		return 0, io.EOF
	}
	n := copy(p, r.src[r.sent:min(len(r.src), r.sent+r.chunk)])
	r.sent += n
	return n, nil
}

// A body is read whole, of known or unknown length, in whatever pieces it comes, holding at
// most twice what has come, and every byte counted is given back.
func TestReadCounted(t *testing.T) {
	for _, size := range []int{0, 1, 4095, 4096, 4097, 30000, 65536, 100000, 1 << 20} {
		for _, chunk := range []int{777, 1 << 20} {
			for _, known := range []bool{true, false} {
				t.Run(fmt.Sprintf("%d/%d/%v", size, chunk, known), func(t *testing.T) {
					src := bytes.Repeat([]byte("0123456789abcdef"), size/16+1)[:size]
					room := &bodyRoom{max: 8 << 20}
					length := int64(size)
					if !known {
						length = -1
					}
					body, held, full, err := readCounted(&chunkReader{t: t, src: src, chunk: chunk, room: room}, length, 2<<20, room)
					if err != nil || full || !bytes.Equal(body, src) {
						t.Fatalf("read %d bytes of %d (full %v): %v", len(body), size, full, err)
					}
					if room.n.Load() != held || held < int64(len(body)) {
						t.Fatalf("%d counted, %d held, for a body of %d", room.n.Load(), held, len(body))
					}
					room.release(held)
				})
			}
		}
	}
	// A body over the room is refused, and what it counted can be given back.
	room := &bodyRoom{max: 64 << 10}
	_, held, full, _ := readCounted(&chunkReader{t: t, src: make([]byte, 100<<10), chunk: 4096, room: room}, 100<<10, 1<<20, room)
	if !full || room.n.Load() != held {
		t.Fatalf("a body over the room: full %v, %d counted, %d held", full, room.n.Load(), held)
	}
}
