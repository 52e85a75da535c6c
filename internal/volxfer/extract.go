package volxfer

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Wipe removes every entry of root's directory (not the directory itself).
func Wipe(root *os.Root) error {
	d, err := root.Open(".")
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("list the volume: %w", err)
	}
	for _, e := range ents {
		if err := root.RemoveAll(e.Name()); err != nil {
			return fmt.Errorf("empty the volume: %w", err)
		}
	}
	return nil
}

// Extract writes the tar of r into root: directories, regular files,
// symlinks and hardlinks with their numeric owners, modes (setuid, setgid
// and sticky included) and modification times (a symlink's own; a
// directory's once its entries are written). An absolute name, a name with "..", or a path
// through a symlink that leaves root is refused; so are device nodes,
// FIFOs and any other type. An entry replaces what its name holds. r's
// error is returned wrapped ("read the tar: …").
func Extract(root *os.Root, r io.Reader) error {
	tr := tar.NewReader(r)
	type dirTime struct {
		name         string
		atime, mtime time.Time
	}
	var dirs []dirTime
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the tar: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		name, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "." {
			continue
		}
		if err := extractOne(root, tr, h, name); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if h.Typeflag == tar.TypeDir {
			dirs = append(dirs, dirTime{name, accessTime(h), h.ModTime})
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := root.Chtimes(dirs[i].name, dirs[i].atime, dirs[i].mtime); err != nil {
			return fmt.Errorf("%s: %w", dirs[i].name, err)
		}
	}
	return nil
}

// entryName is a tar name made relative and clean; absolute names and
// names with ".." are refused.
func entryName(n string) (string, error) {
	if strings.HasPrefix(n, "/") {
		return "", fmt.Errorf("%q: an absolute name is not restored", n)
	}
	for _, part := range strings.Split(n, "/") {
		if part == ".." {
			return "", fmt.Errorf("%q: a name with \"..\" is not restored", n)
		}
	}
	return path.Clean(n), nil
}

func extractOne(root *os.Root, tr *tar.Reader, h *tar.Header, name string) error {
	if h.Typeflag != tar.TypeDir {
		if err := root.MkdirAll(path.Dir(name), 0o755); err != nil {
			return err
		}
		if err := root.RemoveAll(name); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if fi, err := root.Lstat(name); err == nil && !fi.IsDir() {
			if err := root.Remove(name); err != nil {
				return err
			}
		}
		if err := root.MkdirAll(name, 0o700); err != nil {
			return err
		}
	case tar.TypeReg:
		if err := writeFile(root, name, tr); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := root.Symlink(h.Linkname, name); err != nil {
			return err
		}
		if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
			return err
		}
		return lchtimes(root, name, accessTime(h), h.ModTime)
	case tar.TypeLink:
		target, err := entryName(h.Linkname)
		if err != nil {
			return err
		}
		return root.Link(target, name)
	default:
		return fmt.Errorf("an entry of type %q (a device node, a FIFO or another special file) is not restored: remove it from the volume and take the snapshot again", h.Typeflag)
	}
	if err := root.Lchown(name, h.Uid, h.Gid); err != nil {
		return err
	}
	// After the owner: chown clears the setuid and setgid bits.
	if err := root.Chmod(name, h.FileInfo().Mode()&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)); err != nil {
		return err
	}
	if h.Typeflag == tar.TypeReg {
		return root.Chtimes(name, accessTime(h), h.ModTime)
	}
	return nil
}

func writeFile(root *os.Root, name string, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("read the tar: %w", err)
	}
	return f.Close()
}

// lchtimes sets the times of the symlink name itself (os.Root has no
// call that does not follow it): through its directory, opened in root.
func lchtimes(root *os.Root, name string, atime, mtime time.Time) error {
	dir, err := root.Open(path.Dir(name))
	if err != nil {
		return err
	}
	defer dir.Close()
	ts := []unix.Timespec{unix.NsecToTimespec(atime.UnixNano()), unix.NsecToTimespec(mtime.UnixNano())}
	return unix.UtimesNanoAt(int(dir.Fd()), path.Base(name), ts, unix.AT_SYMLINK_NOFOLLOW)
}

func accessTime(h *tar.Header) time.Time {
	if h.AccessTime.IsZero() {
		return h.ModTime
	}
	return h.AccessTime
}
