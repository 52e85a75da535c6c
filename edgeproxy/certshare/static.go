package certshare

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// staticFiles are the files of one static/<name>/ directory, in the order
// a mirror writes them (the key first, as certstore.AddStatic does, so a
// reader sees the old pair, the new pair, or a mismatch it refuses for
// that host only).
var staticFiles = []string{"key.pem", "cert.pem"}

// StaticEntry is one static/<name>/ directory in GET /v1/static: its
// files' SHA-256 (hex) by file name.
type StaticEntry struct {
	Name  string            `json:"name"`
	Files map[string]string `json:"files"`
}

// validStaticName reports whether name is a plain directory name (no
// separator, not hidden, not "." or "..").
func validStaticName(name string) bool {
	return name != "" && len(name) <= 300 && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, "/\\\x00")
}

// readLimited reads path, refusing a file over MaxValueBytes.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxValueBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxValueBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, MaxValueBytes)
	}
	return b, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// staticManifest lists root's static/ (empty when it does not exist).
func staticManifest(root string) ([]StaticEntry, error) {
	base := filepath.Join(root, StaticDir)
	ents, err := os.ReadDir(base)
	if errors.Is(err, fs.ErrNotExist) {
		return []StaticEntry{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []StaticEntry{}
	for _, e := range ents {
		if !e.IsDir() || !validStaticName(e.Name()) {
			continue
		}
		files := map[string]string{}
		for _, f := range staticFiles {
			if b, err := readLimited(filepath.Join(base, e.Name(), f)); err == nil {
				files[f] = sum(b)
			}
		}
		if len(files) > 0 {
			out = append(out, StaticEntry{Name: e.Name(), Files: files})
		}
	}
	return out, nil
}

func (s *Server) serveStaticList(w http.ResponseWriter, _ *http.Request) {
	m, err := staticManifest(s.root)
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, m)
}

func (s *Server) serveStaticFile(w http.ResponseWriter, r *http.Request) {
	name, file := r.URL.Query().Get("name"), r.URL.Query().Get("file")
	if !validStaticName(name) || !slices.Contains(staticFiles, file) {
		http.Error(w, "bad name or file", http.StatusBadRequest)
		return
	}
	b, err := readLimited(filepath.Join(s.root, StaticDir, name, file))
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(b)
}

// SyncStatic mirrors the server's static/ into localCertsRoot/static/:
// it adds and replaces the files whose content differs (written
// atomically, 0600 files in 0700 directories) and removes the
// directories and files the server no longer has. changed reports
// whether anything was written or removed. A file that changes on the
// server between the listing and its download is left for the next
// sync (an error). Errors wrap ErrUnauthorized for a wrong token.
func (c *Client) SyncStatic(ctx context.Context, localCertsRoot string) (changed bool, err error) {
	var manifest []StaticEntry
	b, err := c.do(ctx, http.MethodGet, "/v1/static", nil, nil)
	if err != nil {
		return false, fmt.Errorf("certshare: list static certificates: %w", err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		return false, fmt.Errorf("certshare: list static certificates: %w", err)
	}
	base := filepath.Join(localCertsRoot, StaticDir)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return false, fmt.Errorf("certshare: %w", err)
	}
	want := map[string]bool{}
	for _, e := range manifest {
		if !validStaticName(e.Name) {
			continue
		}
		want[e.Name] = true
		ch, err := c.syncStaticDir(ctx, filepath.Join(base, e.Name), e)
		changed = changed || ch
		if err != nil {
			return changed, err
		}
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		return changed, fmt.Errorf("certshare: %w", err)
	}
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), ".") || want[d.Name()] {
			continue
		}
		if err := os.RemoveAll(filepath.Join(base, d.Name())); err != nil {
			return changed, fmt.Errorf("certshare: %w", err)
		}
		changed = true
	}
	return changed, nil
}

// syncStaticDir makes dir hold exactly e's files.
func (c *Client) syncStaticDir(ctx context.Context, dir string, e StaticEntry) (changed bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, fmt.Errorf("certshare: %w", err)
	}
	for _, f := range staticFiles {
		path := filepath.Join(dir, f)
		local, lerr := readLimited(path)
		h, ok := e.Files[f]
		if !ok {
			if lerr == nil {
				if err := os.Remove(path); err != nil {
					return changed, fmt.Errorf("certshare: %w", err)
				}
				changed = true
			}
			continue
		}
		if lerr == nil && sum(local) == h {
			continue
		}
		q := url.Values{"name": {e.Name}, "file": {f}}
		b, err := c.do(ctx, http.MethodGet, "/v1/static/file", q, nil)
		if err != nil {
			return changed, fmt.Errorf("certshare: static %s/%s: %w", e.Name, f, err)
		}
		if sum(b) != h {
			return changed, fmt.Errorf("certshare: static %s/%s changed during the sync; next sync takes it", e.Name, f)
		}
		if err := writeFileAtomic(path, b); err != nil {
			return changed, err
		}
		changed = true
	}
	return changed, nil
}

// writeFileAtomic writes data to path through a 0600 temp file renamed
// over it, then fsyncs the directory so the rename survives a crash.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("certshare: write %s: %w", path, err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	_, err = io.Copy(tmp, bytes.NewReader(data))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, 0o600)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		return fmt.Errorf("certshare: write %s: %w", path, err)
	}
	return nil
}

// syncDir fsyncs directory dir (a rename in it is durable only then).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}
