//go:build !unix

package dataplane

import "net"

// PeerClosed is not detected on this platform (the answer's write fails).
func peerClosed(net.Conn) bool { return false }
