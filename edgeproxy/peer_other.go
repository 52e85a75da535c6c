//go:build !unix

package edgeproxy

import "net"

// peerClosed is not detected on this platform (the answer's write fails).
func peerClosed(net.Conn) bool { return false }
