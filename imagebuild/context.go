package imagebuild

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"github.com/gordon-deploy/docker-gordon/core"
)

// buildContext is a build's context directory as docker build sends it:
// every file not excluded by the context's .dockerignore (the Dockerfile
// and .dockerignore are sent even when excluded, as docker build does).
type buildContext struct {
	dir        string
	dockerfile string // slash path relative to dir
	// files are the slash paths relative to dir, sorted; directories too.
	files []string
}

// readBuildContext lists the context of b. Errors name the context
// directory: a missing directory or Dockerfile, an unreadable
// .dockerignore or a bad pattern in it.
func readBuildContext(b *core.BuildSpec) (*buildContext, error) {
	dockerfile := b.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	st, err := os.Stat(b.Context)
	if err != nil {
		return nil, fmt.Errorf("build context %s: %w", b.Context, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("build context %s is not a directory", b.Context)
	}
	if _, err := os.Stat(filepath.Join(b.Context, filepath.FromSlash(dockerfile))); err != nil {
		return nil, fmt.Errorf("build context %s: Dockerfile %s: %w", b.Context, dockerfile, err)
	}
	excludes, err := readDockerignore(b.Context)
	if err != nil {
		return nil, err
	}
	pm, err := patternmatcher.New(excludes)
	if err != nil {
		return nil, fmt.Errorf("build context %s: .dockerignore: %w", b.Context, err)
	}
	keep := map[string]bool{dockerfile: true, ".dockerignore": true}
	c := &buildContext{dir: b.Context, dockerfile: dockerfile}
	err = filepath.WalkDir(b.Context, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(b.Context, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		excluded, err := pm.MatchesOrParentMatches(rel)
		if err != nil {
			return err
		}
		if excluded && !keep[rel] {
			if d.IsDir() && !pm.Exclusions() && !strings.HasPrefix(dockerfile, rel+"/") {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
			c.files = append(c.files, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("build context %s: %w", b.Context, err)
	}
	slices.Sort(c.files)
	return c, nil
}

// readDockerignore returns the patterns of dir/.dockerignore (none when
// there is no such file).
func readDockerignore(dir string) ([]string, error) {
	f, err := os.Open(filepath.Join(dir, ".dockerignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("build context %s: %w", dir, err)
	}
	defer f.Close()
	pats, err := ignorefile.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("build context %s: .dockerignore: %w", dir, err)
	}
	return pats, nil
}

// buildHash is the hex sha256 of the context's contents (each file's path,
// type, permission bits and bytes, a link's target; not times or owners)
// and of the build settings (dockerfile, target, args, labels): equal
// hashes build the same image.
func buildHash(c *buildContext, b *core.BuildSpec) (string, error) {
	h := sha256.New()
	settings, _ := json.Marshal(struct {
		Dockerfile, Target string
		Args, Labels       []string
	}{c.dockerfile, b.Target, sortedPairs(b.Args), sortedPairs(b.Labels)})
	h.Write(settings)
	for _, rel := range c.files {
		if err := hashEntry(h, c.dir, rel); err != nil {
			return "", fmt.Errorf("build context %s: %w", c.dir, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashEntry(h hash.Hash, dir, rel string) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "\x00%s\x00%o\x00", rel, fi.Mode())
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		io.WriteString(h, target)
	case fi.Mode().IsRegular():
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%d\x00", fi.Size())
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
	}
	return nil
}

// sortedPairs returns m as sorted "k=v" strings.
func sortedPairs(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// writeTar writes the context as an uncompressed tar, owners root.
func (c *buildContext) writeTar(w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, rel := range c.files {
		p := filepath.Join(c.dir, filepath.FromSlash(rel))
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			if err := copyFile(tw, p); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func copyFile(w io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// BuiltTag is the tag of a service's build: <prefix>/<app>-<service>:<first
// 16 hex digits of the build hash>, prefix "gordon" or the manifest's
// registry.
func BuiltTag(prefix, app, service, hash string) string {
	return path.Join(prefix, app+"-"+service) + ":" + hash[:16]
}
