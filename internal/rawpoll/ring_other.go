//go:build !linux

package rawpoll

import "errors"

// Ring is Linux's only.
type Ring struct{}

// NewRing returns errors.ErrUnsupported.
func NewRing(n uint32) (*Ring, error) { return nil, errors.ErrUnsupported }

func (r *Ring) Send(fd int, b []byte, userData uint64) error       { return errors.ErrUnsupported }
func (r *Ring) Recv(fd int, b []byte, userData uint64) error       { return errors.ErrUnsupported }
func (r *Ring) Submit(done func(userData uint64, res int32)) error { return errors.ErrUnsupported }
func (r *Ring) Close() error                                       { return nil }
