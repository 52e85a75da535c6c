package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	"github.com/google/renameio/v2"

	"github.com/gordon-deploy/docker-gordon/core"
)

// File and directory modes of the state directory (ARCHITECTURE §3).
const (
	fileMode os.FileMode = 0o600
	dirMode  os.FileMode = 0o700
)

// CorruptError reports a torn or unparsable record (ARCHITECTURE §3, SPEC
// decision 1). It names the file and is never resolved by resetting the
// record: an operator inspects or moves the file aside. It does NOT wrap
// core.ErrNotFound, so a corrupt record is never mistaken for an absent one;
// Unwrap returns the decoding error only.
type CorruptError struct {
	// Path is the absolute path of the record.
	Path string
	// Err is the decoding or validation error.
	Err error
}

// Error names the path and the decoding error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("journal: corrupt record %s: %v (the record is never reset automatically: inspect it or move it aside)", e.Path, e.Err)
}

// Unwrap returns the decoding error.
func (e *CorruptError) Unwrap() error { return e.Err }

// tempName matches renameio's temporary files: "." + base name + decimal
// random suffix, in the destination's directory. Record names never start
// with a dot (validName refuses it), so the pattern cannot hit a record.
var tempName = regexp.MustCompile(`^\..+[0-9]+$`)

// writeFileAtomic replaces path with data: temp file in the same directory,
// write, fsync, close, rename, then fsync of the directory (decision 1).
// Missing parent directories are created 0700 (and their parents fsynced).
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := ensureDir(dir); err != nil {
		return err
	}
	pf, err := renameio.NewPendingFile(path, renameio.WithTempDir(dir), renameio.WithStaticPermissions(fileMode))
	if err != nil {
		return fmt.Errorf("journal: write %s: %w", path, err)
	}
	defer pf.Cleanup() //nolint:errcheck // no-op after a successful replace
	if _, err := pf.Write(data); err != nil {
		return fmt.Errorf("journal: write %s: %w", path, err)
	}
	if err := pf.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("journal: write %s: %w", path, err)
	}
	return syncDir(dir)
}

// writeJSON encodes v indented and writes it atomically to path.
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("journal: encode %s: %w", path, err)
	}
	return writeFileAtomic(path, append(data, '\n'))
}

// readJSON decodes the record at path into v. An absent file is an error
// wrapping core.ErrNotFound (what names the object); bytes that are not a
// JSON value of the expected kind ('{' object or '[' array) are a
// *CorruptError.
func readJSON(path string, v any, kind byte, what string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", what, core.ErrNotFound)
		}
		return fmt.Errorf("journal: read %s: %w", path, err)
	}
	return decodeJSON(path, data, v, kind)
}

// decodeJSON is readJSON after the read.
func decodeJSON(path string, data []byte, v any, kind byte) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return &CorruptError{Path: path, Err: errors.New("empty file")}
	}
	if trimmed[0] != kind {
		return &CorruptError{Path: path, Err: fmt.Errorf("want a JSON %s", kindName(kind))}
	}
	if err := json.Unmarshal(trimmed, v); err != nil {
		return &CorruptError{Path: path, Err: err}
	}
	return nil
}

func kindName(kind byte) string {
	if kind == '[' {
		return "array"
	}
	return "object"
}

// removeFile removes path (absent is fine) and fsyncs its directory.
func removeFile(path string) error {
	err := os.Remove(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("journal: remove %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// ensureDir creates dir and any missing parents with mode 0700, fsyncing the
// parent of every directory it creates so the new entry is durable.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("journal: %s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("journal: stat %s: %w", dir, err)
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := ensureDir(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, dirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("journal: mkdir %s: %w", dir, err)
	}
	return syncDir(parent)
}

// syncDir fsyncs a directory so a rename, create or remove in it is durable
// (renameio does not do this).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("journal: open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("journal: fsync dir %s: %w", dir, err)
	}
	return nil
}

// validName checks one path component supplied by a caller (app, service,
// container, secret, op or revision id): non-empty, at most 255 bytes, no
// path separator, no NUL, not "." or "..", and no leading dot (dot names are
// reserved for temporary files). Errors wrap core.ErrInvalid.
func validName(kind, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s name", core.ErrInvalid, kind)
	case len(name) > 255:
		return fmt.Errorf("%w: %s name longer than 255 bytes", core.ErrInvalid, kind)
	case strings.ContainsAny(name, "/\\\x00"):
		return fmt.Errorf("%w: %s name %q contains a path separator or NUL", core.ErrInvalid, kind, name)
	case strings.HasPrefix(name, "."):
		return fmt.Errorf("%w: %s name %q starts with a dot", core.ErrInvalid, kind, name)
	}
	return nil
}
