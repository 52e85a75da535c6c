package snapshot

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Export writes snapshot id of app to w as one uncompressed tar holding
// manifest.json first, then each volume's .tar.zst as stored, so a copy
// off the machine keeps the compression and the digests. Every volume is
// decompressed and its digest checked first: a damaged snapshot is an
// error and nothing is written (a copy kept off the machine must be one
// that restores).
func (s *Store) Export(app, id string, w io.Writer) error {
	m, err := s.Get(app, id)
	if err != nil {
		return err
	}
	for _, v := range m.Volumes {
		r, _, err := s.OpenVolume(app, id, v.Name)
		if err != nil {
			return fmt.Errorf("export snapshot %s: %w", id, err)
		}
		_, err = io.Copy(io.Discard, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("export snapshot %s: %w; nothing was written", id, err)
		}
	}
	tw := tar.NewWriter(w)
	dir := filepath.Join(s.appDir(app), id)
	names := []string{manifestFile}
	for _, v := range m.Volumes {
		names = append(names, v.File())
	}
	for _, name := range names {
		if err := addFile(tw, filepath.Join(dir, name), name); err != nil {
			return fmt.Errorf("export snapshot %s: %w", id, err)
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// Import reads a file Export wrote and stores it as a snapshot of app,
// under its own id, with trigger TriggerImport (never removed by
// retention): every volume is decompressed and its digest checked before
// the manifest is written. An id the app has already is a conflict; a
// file that is not an export, or whose volumes do not match their
// digests, is invalid and nothing is kept.
func (s *Store) Import(app string, r io.Reader) (Manifest, error) {
	if err := checkApp(app); err != nil {
		return Manifest{}, err
	}
	tr := tar.NewReader(r)
	h, err := tr.Next()
	if err != nil || h.Name != manifestFile {
		return Manifest{}, fmt.Errorf("import a snapshot: %w: the file does not start with a snapshot manifest; give a file `docker gordon snapshots export` wrote", core.ErrInvalid)
	}
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(tr, 1<<20)).Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("import a snapshot: %w: the manifest is damaged: %v", core.ErrInvalid, err)
	}
	want := map[string]Volume{}
	for _, v := range m.Volumes {
		switch {
		case v.Kind == KindDump && (!m.IsDump() || m.Command[0] == ""):
			return Manifest{}, fmt.Errorf("import a snapshot: %w: the manifest holds a dump but names no command that took it; give a file `docker gordon snapshots export` wrote", core.ErrInvalid)
		case v.Kind != "" && v.Kind != KindDump:
			return Manifest{}, fmt.Errorf("import a snapshot: %w: the manifest's entry %s is of an unknown kind %q; give a file `docker gordon snapshots export` wrote", core.ErrInvalid, v.Name, v.Kind)
		}
		want[v.File()] = v
	}
	m.App, m.Trigger = app, TriggerImport
	w, err := s.Begin(m)
	if err != nil {
		return Manifest{}, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = w.Abort()
		}
	}()
	for len(want) > 0 {
		h, err := tr.Next()
		if err != nil {
			return Manifest{}, fmt.Errorf("import snapshot %s: %w: the file ends before volume(s) %s", m.ID, core.ErrInvalid, strings.Join(keys(want), ", "))
		}
		v, found := want[h.Name]
		if !found {
			continue
		}
		delete(want, h.Name)
		got, err := w.add(Volume{Name: v.Name, Path: v.Path, Kind: v.Kind}, func(out io.Writer) error {
			zr, err := zstd.NewReader(tr)
			if err != nil {
				return err
			}
			defer zr.Close()
			_, err = io.Copy(out, zr)
			return err
		})
		if err != nil {
			return Manifest{}, fmt.Errorf("import snapshot %s: volume %s: %w: %v", m.ID, v.Name, core.ErrInvalid, err)
		}
		if got.Digest != v.Digest {
			return Manifest{}, fmt.Errorf("import snapshot %s: %w: volume %s is damaged (digest %s, the manifest records %s)", m.ID, core.ErrInvalid, v.Name, got.Digest, v.Digest)
		}
	}
	if _, err := tr.Next(); err != nil && !errors.Is(err, io.EOF) {
		return Manifest{}, fmt.Errorf("import snapshot %s: %w: %v", m.ID, core.ErrInvalid, err)
	}
	out, err := w.Commit(m)
	if err != nil {
		return Manifest{}, err
	}
	ok = true
	return out, nil
}

func keys(m map[string]Volume) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// WriteDump writes the output of online dump id of app to w, decompressed
// and checked against its digest (a mismatch is an error after the last
// byte). A snapshot that is not a dump is invalid: export it whole.
func (s *Store) WriteDump(app, id string, w io.Writer) error {
	m, err := s.Get(app, id)
	if err != nil {
		return err
	}
	if !m.IsDump() {
		return fmt.Errorf("%w: snapshot %s is a copy of volumes, not an online dump; export it whole: docker gordon snapshots export %s %s > FILE", core.ErrInvalid, id, app, id)
	}
	r, _, err := s.OpenVolume(app, id, KindDump)
	if err != nil {
		return err
	}
	defer r.Close()
	if _, err := io.Copy(w, r); err != nil {
		return fmt.Errorf("snapshot %s: write the dump: %w", id, err)
	}
	return nil
}
