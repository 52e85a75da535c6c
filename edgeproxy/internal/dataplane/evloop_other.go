//go:build !linux

package dataplane

import "net"

// evLoop: event loops are Linux only (evloop_linux.go); elsewhere every
// connection is served by a goroutine.
type evLoop struct{ done chan struct{} }

func evLoopCount(int) int { return 0 }

func (h *connServer) startLoops(int) {}

func (l *evLoop) adopt(net.Conn) bool { return false }

func (l *evLoop) wakeup(bool) {}
