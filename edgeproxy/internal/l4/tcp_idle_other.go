//go:build !linux

package l4

import (
	"net"
	"time"
)

// silentFor cannot tell how long c has been silent outside Linux: relayed
// TCP connections have no idle timeout there.
func silentFor(net.Conn) (time.Duration, bool) { return 0, false }
