package snapshot

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"github.com/klauspost/compress/zstd"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/durable"
)

// Writer takes one snapshot: Begin, one AddVolume per volume, then Commit
// (the snapshot is listed from then on) or Abort.
type Writer struct {
	s   *Store
	m   Manifest
	dir string
}

var volumeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// Begin starts snapshot m.ID of m.App (m.Volumes is filled by AddVolume).
// An id already taken wraps core.ErrConflict.
func (s *Store) Begin(m Manifest) (*Writer, error) {
	if err := checkApp(m.App); err != nil {
		return nil, err
	}
	if err := checkID(m.ID); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.appDir(m.App), 0o700); err != nil {
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	dir := filepath.Join(s.appDir(m.App), m.ID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("snapshot %s of %s: %w: it exists already", m.ID, m.App, core.ErrConflict)
		}
		return nil, fmt.Errorf("snapshot store: %w", err)
	}
	if err := durable.SyncDir(s.appDir(m.App)); err != nil {
		return nil, err
	}
	m.Volumes = nil
	return &Writer{s: s, m: m, dir: dir}, nil
}

// AddVolume stores volume name (mounted at path) from the tar fill writes:
// compressed with zstd into <volume>.tar.zst, hashed on the way, fsynced.
// It returns the volume's entry (sizes and digest).
func (w *Writer) AddVolume(name, path string, fill func(io.Writer) error) (Volume, error) {
	return w.add(Volume{Name: name, Path: path}, fill)
}

// AddDump stores an online dump's output, which fill writes, as the
// snapshot's one entry (kind KindDump, name "dump", dump.zst), as
// AddVolume stores a tar. The manifest's Command names the command.
func (w *Writer) AddDump(fill func(io.Writer) error) (Volume, error) {
	return w.add(Volume{Name: KindDump, Kind: KindDump}, fill)
}

func (w *Writer) add(v Volume, fill func(io.Writer) error) (Volume, error) {
	name := v.Name
	if !volumeRE.MatchString(name) {
		return Volume{}, fmt.Errorf("snapshot: volume name %q: %w", name, core.ErrInvalid)
	}
	final := filepath.Join(w.dir, v.File())
	f, err := os.CreateTemp(w.dir, "."+name+"-*")
	if err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: %w", name, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	defer f.Close()
	counted := &countWriter{w: f}
	bw := bufio.NewWriterSize(counted, 1<<20)
	zw, err := zstd.NewWriter(bw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: %w", name, err)
	}
	h := sha256.New()
	tarLen := &countWriter{w: io.MultiWriter(zw, h)}
	if err := fill(tarLen); err != nil {
		zw.Close()
		return Volume{}, err
	}
	if err := zw.Close(); err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: compress: %w", name, err)
	}
	if err := bw.Flush(); err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: write: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: fsync: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: %w", name, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return Volume{}, fmt.Errorf("snapshot of volume %s: %w", name, err)
	}
	v.Size, v.Stored, v.Digest = tarLen.n, counted.n, digestOf(h)
	w.m.Volumes = append(w.m.Volumes, v)
	return v, nil
}

// Commit writes the manifest durably (the snapshot's commit point) and
// returns it. m's fields other than Volumes replace the ones Begin got
// (Duration, for one).
func (w *Writer) Commit(m Manifest) (Manifest, error) {
	m.ID, m.App, m.Volumes = w.m.ID, w.m.App, w.m.Volumes
	if err := durable.SyncDir(w.dir); err != nil {
		return Manifest{}, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Manifest{}, err
	}
	if err := durable.WriteFile(filepath.Join(w.dir, manifestFile), append(b, '\n'), 0o600); err != nil {
		return Manifest{}, fmt.Errorf("snapshot %s: write the manifest: %w", m.ID, err)
	}
	return m, nil
}

// Manifest returns the snapshot as written so far.
func (w *Writer) Manifest() Manifest { return w.m }

// Abort removes the snapshot's files (a partial snapshot a crash leaves
// is removed by Sweep).
func (w *Writer) Abort() error {
	if err := os.RemoveAll(w.dir); err != nil {
		return fmt.Errorf("remove the partial snapshot %s: %w", w.m.ID, err)
	}
	return nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func digestOf(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// OpenVolume returns the tar of volume name of snapshot id (a dump's
// output for name "dump" of a dump), decompressed.
// Reading it to the end checks its digest: a mismatch is an error from
// Read (the snapshot is damaged), never a silent short restore.
func (s *Store) OpenVolume(app, id, name string) (io.ReadCloser, Volume, error) {
	m, err := s.Get(app, id)
	if err != nil {
		return nil, Volume{}, err
	}
	var v Volume
	for _, x := range m.Volumes {
		if x.Name == name {
			v = x
		}
	}
	if v.Name == "" {
		return nil, Volume{}, fmt.Errorf("snapshot %s of %s holds no volume %s: %w", id, app, name, core.ErrNotFound)
	}
	f, err := os.Open(filepath.Join(s.appDir(app), id, v.File()))
	if err != nil {
		return nil, Volume{}, fmt.Errorf("snapshot %s of %s: volume %s: %w", id, app, name, err)
	}
	zr, err := zstd.NewReader(bufio.NewReaderSize(f, 1<<20), zstd.WithDecoderConcurrency(2))
	if err != nil {
		f.Close()
		return nil, Volume{}, fmt.Errorf("snapshot %s of %s: volume %s: %w", id, app, name, err)
	}
	return &verifyReader{f: f, zr: zr, h: sha256.New(), want: v.Digest, what: fmt.Sprintf("snapshot %s volume %s", id, name)}, v, nil
}

type verifyReader struct {
	f    *os.File
	zr   *zstd.Decoder
	h    hash.Hash
	want string
	what string
}

func (r *verifyReader) Read(p []byte) (int, error) {
	n, err := r.zr.Read(p)
	r.h.Write(p[:n])
	if errors.Is(err, io.EOF) {
		if got := digestOf(r.h); got != r.want {
			return n, fmt.Errorf("%s is damaged: its digest is %s, the manifest records %s", r.what, got, r.want)
		}
	}
	return n, err
}

func (r *verifyReader) Close() error {
	r.zr.Close()
	return r.f.Close()
}
