//go:build !linux

package bench

import (
	"io"
	"net"
)

// rawIO is Linux's only: elsewhere pollers read and write through the connection.
func rawIO(net.Conn) io.ReadWriter { return nil }
