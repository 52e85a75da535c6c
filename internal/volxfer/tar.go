package volxfer

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// WriteTar writes a tar of the directory dir to w, in the format of the
// docker runtime's ExportVolume (the engine's archive API, its names made
// relative to the volume): entries in lexical walk order, names relative
// to dir (a directory's with a trailing "/"), dir's own entry dropped; PAX
// format, modification times cut to whole seconds, no access or change
// times, no user or group names; the numeric owner, the mode bits
// (setuid, setgid, sticky included), symlink targets as they are, a
// device's major and minor; a file with more than one link is stored once
// and its further names as hardlinks to the first; sockets are skipped.
// Symlinks are never followed. w's error is returned as is.
func WriteTar(dir string, w io.Writer) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tw := tar.NewWriter(w)
	seen := map[uint64]string{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			return nil
		}
		hdr, err := header(p, filepath.ToSlash(rel), fi, seen)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			return copyFile(root, rel, tw)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// header is the tar header of the file at p named name, as the engine's
// archive writes it; seen maps inodes to the first name stored.
func header(p, name string, fi fs.FileInfo, seen map[uint64]string) (*tar.Header, error) {
	link := ""
	if fi.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = os.Readlink(p); err != nil {
			return nil, err
		}
	}
	hdr, err := tar.FileInfoHeader(noSys{fi}, link)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	hdr.Format = tar.FormatPAX
	hdr.ModTime = hdr.ModTime.Truncate(time.Second)
	hdr.AccessTime, hdr.ChangeTime = time.Time{}, time.Time{}
	hdr.Name = name
	if fi.IsDir() {
		hdr.Name += "/"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return hdr, nil
	}
	hdr.Uid, hdr.Gid = int(st.Uid), int(st.Gid)
	if hdr.Typeflag == tar.TypeChar || hdr.Typeflag == tar.TypeBlock {
		hdr.Devmajor, hdr.Devminor = int64(major(uint64(st.Rdev))), int64(minor(uint64(st.Rdev)))
	}
	if !fi.IsDir() && st.Nlink > 1 {
		if first, ok := seen[st.Ino]; ok {
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, first, 0
		} else {
			seen[st.Ino] = name
		}
	}
	return hdr, nil
}

func copyFile(root *os.Root, rel string, w io.Writer) error {
	f, err := root.Open(rel)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// noSys hides the stat data from tar.FileInfoHeader, which would look the
// owner's names up (the engine's archive stores none).
type noSys struct{ fs.FileInfo }

func (noSys) Sys() any { return nil }

// major and minor split a Linux device number.
func major(dev uint64) uint32 { return uint32(((dev >> 8) & 0xfff) | ((dev >> 32) & 0xfffff000)) }
func minor(dev uint64) uint32 { return uint32((dev & 0xff) | ((dev >> 12) & 0xffffff00)) }
