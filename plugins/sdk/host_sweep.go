package sdk

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ownerFile names, inside a plugin socket directory, the PID of the host
// process that created it; sweepStaleSocketDirs removes directories whose
// owner is dead.
const ownerFile = "owner.pid"

// legacyStaleAge is how old a socket directory without an owner file must
// be before a sweep removes it (directories of older versions).
const legacyStaleAge = time.Hour

var sweepOnce sync.Once

// writeOwner records this process as the owner of dir (best effort).
func writeOwner(dir string) {
	_ = os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
}

// sweepStaleSocketDirs removes the gordon-plugins-* directories in tmp that
// a CLI killed without cleanup (kill -9, a crash) left behind: those whose
// owner PID no longer runs, and those without an owner file older than
// legacyStaleAge. Directories of live processes are never touched. Errors
// are ignored: a sweep is best effort and runs once per process.
func sweepStaleSocketDirs(tmp string) {
	if tmp == "" {
		return
	}
	sweepOnce.Do(func() { sweepDir(tmp) })
}

// sweepDir is one sweep of tmp (see sweepStaleSocketDirs).
func sweepDir(tmp string) {
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "gordon-plugins-") {
			continue
		}
		dir := filepath.Join(tmp, e.Name())
		if staleSocketDir(dir) {
			_ = os.RemoveAll(dir)
		}
	}
}

// staleSocketDir reports whether dir's owner is dead (see
// sweepStaleSocketDirs). A directory owned by another user is left alone.
func staleSocketDir(dir string) bool {
	fi, err := os.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return false
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return false
	}
	data, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && time.Since(fi.ModTime()) > legacyStaleAge
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 0 {
		return time.Since(fi.ModTime()) > legacyStaleAge
	}
	return !processAlive(pid)
}

// processAlive reports whether pid exists (signal 0; EPERM means it exists
// under another user).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// SweepStaleSocketDirs removes, once per process, the plugin socket
// directories in the temp directory whose owner process is dead (see
// sweepStaleSocketDirs). The CLI calls it at start, before any plugin runs.
func SweepStaleSocketDirs() { sweepStaleSocketDirs(pluginTempDir()) }
