//go:build unix

package edgeproxy

import (
	"os"
	"syscall"
)

// fileIno returns the inode number of fi (0 when unknown).
func fileIno(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino) //nolint:unconvert // Ino is not uint64 on every unix
	}
	return 0
}
