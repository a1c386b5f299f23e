//go:build !linux

package rawpoll

import "errors"

// Ring is Linux's only.
type Ring struct{}

// ErrRingFull is Send's when as many sends are queued as the ring holds.
var ErrRingFull = errors.New("io_uring: submission queue full")

// NewRing returns errors.ErrUnsupported.
func NewRing(n uint32) (*Ring, error) { return nil, errors.ErrUnsupported }

func (r *Ring) Send(fd int, b []byte, userData uint64) error       { return errors.ErrUnsupported }
func (r *Ring) Submit(done func(userData uint64, res int32)) error { return errors.ErrUnsupported }
func (r *Ring) Close() error                                       { return nil }
