//go:build !linux

package rawpoll

import "errors"

// Poller is Linux's only.
type Poller struct{}

// New returns errors.ErrUnsupported.
func New() (*Poller, error) { return nil, errors.ErrUnsupported }

func (p *Poller) Add(fd int, key uint64) error  { return errors.ErrUnsupported }
func (p *Poller) Del(fd int) error              { return errors.ErrUnsupported }
func (p *Poller) Wait(evs []Event) (int, error) { return 0, errors.ErrUnsupported }
func (p *Poller) Close() error                  { return nil }
func Read(fd int, b []byte) (int, error)        { return 0, errors.ErrUnsupported }
func Write(fd int, b []byte) (int, error)       { return 0, errors.ErrUnsupported }
func WouldBlock(err error) bool                 { return false }
func Dup(fd int) (int, error)                   { return -1, errors.ErrUnsupported }
func Close(fd int) error                        { return errors.ErrUnsupported }
func EnableStamps(fd int) error                 { return errors.ErrUnsupported }

// Stamper is Linux's only.
type Stamper struct{}

func (s *Stamper) Read(fd int, b []byte) (int, int64, error) { return 0, 0, errors.ErrUnsupported }
