//go:build unix

package upstream

import "syscall"

// usable reports whether a pooled backend connection can carry a new
// request: the backend has sent nothing since the last response (no
// unsolicited bytes, which would be taken as the next client's answer) and
// has not closed it. One non-blocking MSG_PEEK receive, no allocation (the
// raw connection and the peek function are made once per connection).
func (fc *Conn) usable() bool {
	if fc.peek == nil {
		sc, ok := fc.C.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return true
		}
		fc.rc = rc
		fc.peek = func(fd uintptr) {
			var b [1]byte
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			fc.clean = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
		}
	}
	fc.clean = true
	if fc.rc.Control(fc.peek) != nil {
		return false
	}
	return fc.clean
}
