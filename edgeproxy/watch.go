package edgeproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// watcher remembers what the route table file looked like when last read.
type watcher struct {
	path     string
	stat     fileStamp
	data     []byte
	lastRead time.Time
	// force makes the next poll read the file even when its stat did not
	// change (Reload).
	force bool
}

// fileStamp is what a stat of the route table shows. Publishers replace the
// file by rename, so a new inode means a new table even when mtime and size
// look unchanged.
type fileStamp struct {
	exists      bool
	mtime       time.Time
	size        int64
	ino         uint64
	initialized bool
}

func stampOf(fi os.FileInfo) fileStamp {
	return fileStamp{exists: true, mtime: fi.ModTime(), size: fi.Size(), ino: fileIno(fi), initialized: true}
}

// poll re-reads the route table when it changed (or force, or the fallback
// interval passed) and applies it when its bytes differ from the last read.
// At start (first) it also writes status.json when there is no table yet,
// so a publisher can see the edge is up.
func (s *Server) poll(w *watcher, first bool) {
	now := time.Now()
	fi, err := os.Stat(w.path)
	var stamp fileStamp
	switch {
	case err == nil:
		stamp = stampOf(fi)
	case errors.Is(err, os.ErrNotExist):
		stamp = fileStamp{initialized: true}
	default:
		s.Logger.Warn("stat route table", "path", w.path, "error", err)
		return
	}
	force := w.force
	w.force = false
	if !first && !force && stamp == w.stat && now.Sub(w.lastRead) < fullRereadEvery {
		return
	}
	if !first && stamp == w.stat {
		s.retryListeners()
	}
	w.stat = stamp
	w.lastRead = now
	if !stamp.exists {
		if first {
			// A restart with routes.json gone (deleted, a state directory
			// restored in part) serves the last table this edge applied,
			// and says so in status.json until a table is published.
			if gen, ok := s.restoreLastGood(); ok {
				s.applyMu.Lock()
				s.lastErr = fmt.Sprintf("%s is missing at start; serving the last applied table (generation %d) from %s", w.path, gen, AppliedFile)
				s.writeStatusLocked()
				s.applyMu.Unlock()
				s.Logger.Warn("route table missing at start; serving the last applied table", "path", w.path, "generation", gen)
				return
			}
			s.applyMu.Lock()
			s.writeStatusLocked()
			s.applyMu.Unlock()
		}
		return // a vanished table keeps the last snapshot serving
	}
	data, err := os.ReadFile(w.path)
	if err != nil {
		s.Logger.Warn("read route table", "path", w.path, "error", err)
		return
	}
	if !first && w.data != nil && string(data) == string(w.data) {
		return
	}
	w.data = data
	t, err := LoadTable(data)
	if err != nil {
		if first {
			s.restoreLastGood()
		}
		s.reject(fmt.Errorf("%s: %w", w.path, err), looseGeneration(data))
		return
	}
	if s.Apply(t) == nil {
		// Remember the last good table, so a restart while routes.json is
		// bad still serves it.
		if err := edgestate.WriteFileAtomic(filepath.Join(filepath.Dir(w.path), AppliedFile), data); err != nil {
			s.Logger.Warn("save last good route table", "error", err)
		}
	}
}

// restoreLastGood applies edge/applied.json (the last table this edge
// applied) when the edge starts with a bad or missing routes.json; it
// returns the generation applied, ok false when there was none to apply.
func (s *Server) restoreLastGood() (generation uint64, ok bool) {
	path := filepath.Join(s.cfg.StateDir, "edge", AppliedFile)
	data, err := os.ReadFile(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			s.Logger.Warn("last good route table unreadable", "path", path, "error", err)
		}
		return 0, false
	}
	t, err := LoadTable(data)
	if err != nil {
		s.Logger.Warn("last good route table unreadable", "path", path, "error", err)
		return 0, false
	}
	s.Logger.Warn("routes.json is bad or missing at start; serving the last good table", "generation", t.Generation)
	if s.Apply(t) != nil {
		return 0, false
	}
	return t.Generation, true
}

// looseGeneration extracts "generation" from a rejected table when the
// document is at least JSON (0 otherwise).
func looseGeneration(data []byte) uint64 {
	var g struct {
		Generation uint64 `json:"generation"`
	}
	_ = json.Unmarshal(data, &g)
	return g.Generation
}
