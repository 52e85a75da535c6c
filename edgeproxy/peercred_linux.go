package edgeproxy

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerUID returns the user id of the process at the other end of uc
// (SO_PEERCRED: the credentials it had when it connected or listened).
func peerUID(uc *net.UnixConn) (uid uint32, pid int32, err error) {
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if cerr != nil {
		return 0, 0, cerr
	}
	return cred.Uid, cred.Pid, nil
}
