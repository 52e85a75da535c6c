package edgestate

import (
	"fmt"
	"os"
	"syscall"
)

// StateDirID is the identity of a state directory as the edge and the
// traffic backend see it: "<device>:<inode>" of the directory. A copy of
// the directory (cp -a, rsync) has another identity, a bind mount of the
// same directory (the edge system container) the same one. "" when the
// directory cannot be stat'ed.
func StateDirID(dir string) string {
	if dir == "" {
		return ""
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return ""
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d:%d", uint64(st.Dev), uint64(st.Ino))
}
