//go:build !unix

package edgeproxy

import "os"

// fileIno is 0 where inodes are not exposed; mtime, size and the periodic
// full re-read still detect changes.
func fileIno(os.FileInfo) uint64 { return 0 }
