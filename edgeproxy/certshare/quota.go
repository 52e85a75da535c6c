package certshare

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Defaults of Server.MaxKeys, Server.MaxBytes and Server.MaxLocks: the
// bounds a token holder can make the manager's disk and memory hold.
const (
	DefaultMaxKeys  = 20000
	DefaultMaxBytes = 128 << 20
	DefaultMaxLocks = 4096
)

// errQuota refuses a store that would pass the storage quota.
var errQuota = errors.New("certificate storage quota reached")

// usage is what acme/ holds: files and their bytes. Known is false until
// it was counted (first store, and after each delete, which may remove a
// whole directory).
type usage struct {
	known       bool
	keys, bytes int64
}

// reserveLocked, under s.mu, checks that storing size bytes at key keeps
// acme/ within MaxKeys files and MaxBytes bytes, and counts it; errQuota
// (naming the bound) when it would not.
func (s *Server) reserveLocked(key string, size int64) error {
	if !s.used.known {
		keys, bytes, err := countTree(s.acme.dir)
		if err != nil {
			return err
		}
		s.used = usage{known: true, keys: keys, bytes: bytes}
	}
	keys, bytes := s.used.keys+1, s.used.bytes+size
	if fi, err := os.Stat(s.acme.filename(key)); err == nil && !fi.IsDir() {
		keys, bytes = keys-1, bytes-fi.Size() // a replacement
	}
	if keys > int64(s.MaxKeys) || bytes > s.MaxBytes {
		return fmt.Errorf("%w: %d keys of %d, %d bytes of %d; delete unused certificates from the state directory's edge/certs/acme", errQuota, s.used.keys, s.MaxKeys, s.used.bytes, s.MaxBytes)
	}
	s.used.keys, s.used.bytes = keys, bytes
	return nil
}

// countTree counts the regular files under dir and their bytes (absent:
// zero).
func countTree(dir string) (keys, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			keys, bytes = keys+1, bytes+fi.Size()
		}
		return nil
	})
	return keys, bytes, err
}

// sweepLocked, under s.mu, drops every lease that lapsed (its holder
// stopped renewing), at most once per LeaseTTL, so names nobody touches
// again do not stay in memory.
func (s *Server) sweepLocked(now time.Time) {
	if now.Before(s.nextSweep) {
		return
	}
	s.nextSweep = now.Add(s.LeaseTTL)
	for name, l := range s.locks {
		if now.After(l.expires) {
			s.dropLocked(name, l)
		}
	}
}

// HeldLocks is the number of leases the server holds in memory (held or
// lapsed and not yet swept).
func (s *Server) HeldLocks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.locks)
}
