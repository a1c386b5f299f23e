//go:build !linux

package server

import "errors"

// Elsewhere than Linux nothing watches parked connections: long-polls wait in the goroutine
// of their request, as net/http runs it.
func newPoller() (poller, error) { return nil, errors.ErrUnsupported }

func readFD(fd int, b []byte) (int, error)  { return 0, errors.ErrUnsupported }
func writeFD(fd int, b []byte) (int, error) { return 0, errors.ErrUnsupported }
func wouldBlock(err error) bool             { return false }

func dupFD(fd int) (int, error) { return -1, errors.ErrUnsupported }
func closeFD(fd int) error      { return errors.ErrUnsupported }
