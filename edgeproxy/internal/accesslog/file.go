package accesslog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
)

// Access log destinations (gordon-edge --access-log).
const (
	Off    = "off"
	Stdout = "stdout"
	// DefaultMaxSize is the size at which an access log file is rotated
	// (--access-log-max-size), DefaultKeep how many rotated files are
	// kept (--access-log-keep).
	DefaultMaxSize = 100 << 20
	DefaultKeep    = 5
)

// Open opens the access log destination dest: "off" (nil, no access
// log), "stdout", or a file path, appended to and rotated once it would
// grow past maxSize bytes (PATH becomes PATH.1, PATH.1 becomes PATH.2,
// ... up to PATH.<keep>; older ones are removed; keep 0 keeps none).
// maxSize <= 0 takes DefaultMaxSize, keep < 0 DefaultKeep. The caller
// closes what it returns (stdout is not closed). Errors say which file
// could not be opened.
func Open(dest string, maxSize int64, keep int) (io.WriteCloser, error) {
	switch dest {
	case Off:
		return nil, nil
	case Stdout, "":
		return nopWriteCloser{os.Stdout}, nil
	}
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	if keep < 0 {
		keep = DefaultKeep
	}
	r := &rotatingFile{path: dest, maxSize: maxSize, keep: keep, openFile: openOSFile}
	if err := r.open(); err != nil {
		return nil, err
	}
	return r, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// file is what rotatingFile needs of an open file (*os.File; tests inject
// one whose disk fills up).
type file interface {
	io.WriteCloser
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
}

func openOSFile(path string) (file, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

// rotatingFile is an append-only file rotated by size (Open).
// Writes come whole from the access log's buffer (lines are not split
// across a rotation unless a single write exceeds maxSize). A write that
// fails part way (a full disk) is cut back to its last whole line, so the
// file never ends in half a line; a file that could not be opened (after
// a rotation) is opened again at the next write.
type rotatingFile struct {
	mu       sync.Mutex
	path     string
	maxSize  int64
	keep     int
	openFile func(path string) (file, error)
	f        file
	size     int64
	closed   bool
}

func (r *rotatingFile) open() error {
	f, err := r.openFile(r.path)
	if err != nil {
		return fmt.Errorf("access log: open %s: %w (check the directory exists and is writable, or use --access-log stdout)", r.path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("access log: stat %s: %w", r.path, err)
	}
	r.f, r.size = f, st.Size()
	return nil
}

// Write appends p, first rotating when p would take the file past
// maxSize (a non-empty file only).
func (r *rotatingFile) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errors.New("access log: file closed")
	}
	if r.f == nil {
		if err := r.open(); err != nil {
			return 0, err
		}
	}
	if r.size > 0 && r.size+int64(len(p)) > r.maxSize {
		if err := r.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := r.f.Write(p)
	if err != nil && n > 0 {
		// Cut the file back to the last whole line written.
		if whole := bytes.LastIndexByte(p[:n], '\n') + 1; whole < n && r.f.Truncate(r.size+int64(whole)) == nil {
			n = whole
		}
	}
	r.size += int64(n)
	return n, err
}

// rotate closes the file, shifts PATH.i to PATH.i+1 (dropping PATH.keep),
// renames PATH to PATH.1 and opens a new PATH.
func (r *rotatingFile) rotate() error {
	_ = r.f.Close()
	r.f = nil
	if r.keep == 0 {
		_ = os.Remove(r.path)
	} else {
		_ = os.Remove(r.path + "." + strconv.Itoa(r.keep))
		for i := r.keep - 1; i >= 1; i-- {
			_ = os.Rename(r.path+"."+strconv.Itoa(i), r.path+"."+strconv.Itoa(i+1))
		}
		if err := os.Rename(r.path, r.path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			if oerr := r.open(); oerr != nil {
				return oerr
			}
			return fmt.Errorf("access log: rotate %s: %w", r.path, err)
		}
	}
	if err := r.open(); err != nil {
		// Undo the rotation so that a file stays open: the full file
		// keeps taking lines until a later rotation succeeds.
		if r.keep > 0 && os.Rename(r.path+".1", r.path) == nil && r.open() == nil {
			return nil
		}
		return err
	}
	return nil
}

// Close closes the file.
func (r *rotatingFile) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}
