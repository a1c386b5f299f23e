package natstest

import (
	"net"
	"testing"
)

// A client port Start chose, taken by another process before the server could listen on
// it, is chosen again.
func TestStartChoosesAgainAPortTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	defer func(f func() (int, error)) { pickPort = f }(pickPort)
	first := pickPort
	pickPort = func() (int, error) {
		picks++
		if picks == 1 {
			return taken.Addr().(*net.TCPAddr).Port, nil
		}
		return first()
	}
	s := Start(t, Self(), Config{})
	if picks != 2 || s.Config.Port == taken.Addr().(*net.TCPAddr).Port {
		t.Fatalf("%d ports picked, the server on %d (taken: %s)", picks, s.Config.Port, taken.Addr())
	}
	if !s.Running() {
		t.Fatal("the server is not running")
	}
}

func init() { ServeIfAsked() } // a test binary started as nats-server serves and exits
