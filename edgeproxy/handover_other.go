//go:build !unix

package edgeproxy

import (
	"errors"
	"net"
)

// Listener hand-over needs unix sockets (SCM_RIGHTS); elsewhere a new edge
// binds its own listeners.

func (s *Server) takeOver() (*net.UnixConn, error) { return nil, nil }

func (s *Server) confirmTakeOver(uc *net.UnixConn) {}

func (s *Server) listenHandover() (net.Listener, error) {
	return nil, errors.New("listener hand-over is supported on unix only")
}
