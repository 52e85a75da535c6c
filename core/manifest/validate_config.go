package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// configRule says what a [[config]] source may be.
const configRule = `want a path relative to the manifest's directory and inside it, e.g. "./nginx.conf" or "conf.d" (a host path outside the project is a [[bind]] the operator approves in config.toml)`

// config validates one [[services.X.config]] (SPEC R82): source relative
// and inside the manifest's directory, path a mount path no other mount
// takes, mode read-only bits. The files are read later (ReadConfigFiles);
// Mode stays 0 unless the manifest sets it.
func (v *validator) config(k string, c rawConfig, mounts map[string]string) (core.ConfigFile, bool) {
	var out core.ConfigFile
	ok := true
	switch {
	case c.Source == nil:
		v.add(k+".source", `required: the project file or directory, relative to the manifest's directory, e.g. "./nginx.conf"`)
		ok = false
	default:
		src, msg := cleanConfigSource(*c.Source)
		if msg != "" {
			v.addf(k+".source", "source %q: %s", *c.Source, msg)
			ok = false
		}
		out.Source = src
	}
	switch {
	case c.Path == nil:
		v.add(k+".path", `required: the absolute path inside the container, e.g. "/etc/nginx/nginx.conf"`)
		ok = false
	default:
		if msg := checkMountPath(*c.Path); msg != "" {
			v.add(k+".path", msg)
			ok = false
		} else if prev, dup := mounts[*c.Path]; dup {
			v.addf(k+".path", "path %q is already mounted by %s: each container path takes one mount", *c.Path, prev)
			ok = false
		} else {
			mounts[*c.Path] = k
			out.Path = *c.Path
		}
	}
	if c.Mode != nil {
		m, isMode := configMode(c.Mode)
		if !isMode || m <= 0 || m > 0o777 || m&0o222 != 0 || m&0o444 == 0 {
			v.addf(k+".mode", "mode %v: a config is read-only: want read bits, optionally execute bits, no write bit, in octal: \"0444\" or 0o444, \"0555\" for a script", c.Mode)
			ok = false
		} else {
			out.Mode = uint32(m)
		}
	}
	return out, ok
}

// configMode reads a mode: an octal string ("0444") or an integer
// (TOML 0o444).
func configMode(v any) (int64, bool) {
	switch m := v.(type) {
	case int64:
		return m, true
	case string:
		n, err := strconv.ParseInt(m, 8, 32)
		return n, err == nil
	}
	return 0, false
}

// cleanConfigSource returns the slash-separated clean form of a config
// source, or a message when it is absolute or leaves the directory.
func cleanConfigSource(src string) (string, string) {
	s := filepath.ToSlash(src)
	if s == "" || path.IsAbs(s) {
		return "", configRule
	}
	c := path.Clean(s)
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", configRule
	}
	return c, ""
}

// ReadConfigFiles reads the project files of spec's configs from dir (the
// manifest's directory, a compose project's directory; SPEC R82): a
// directory source becomes one config per regular file under it, at the
// same relative path below its target; each gets its content, digest and
// mode (the manifest's, else 0555 when its owner may execute it, else
// 0444), and a service's configs are sorted by path. Problems, all at
// once, wrap core.ErrInvalid: a source that is missing, a symbolic link
// out of dir, neither file nor directory, over MaxConfigFileSize, or
// together over MaxConfigAppSize or MaxConfigFiles; two configs at one
// path.
func ReadConfigFiles(spec *core.AppSpec, dir string) error {
	var problems []string
	total, count := 0, 0
	for i := range spec.Services {
		svc := &spec.Services[i]
		if len(svc.Configs) == 0 {
			continue
		}
		var out []core.ConfigFile
		for _, c := range svc.Configs {
			files, err := readConfig(dir, c)
			if err != nil {
				problems = append(problems, fmt.Sprintf("services.%s.config: project file %s (for %s): %v", svc.Name, c.Source, c.Path, err))
				continue
			}
			for _, f := range files {
				total += len(f.Data)
			}
			count += len(files)
			out = append(out, files...)
		}
		sort.SliceStable(out, func(a, b int) bool { return out[a].Path < out[b].Path })
		for j := 1; j < len(out); j++ {
			if out[j].Path == out[j-1].Path {
				problems = append(problems, fmt.Sprintf("services.%s: %s and %s both go to %s: each container path takes one file", svc.Name, out[j-1].Source, out[j].Source, out[j].Path))
			}
		}
		svc.Configs = out
	}
	if total > MaxConfigAppSize || count > MaxConfigFiles {
		problems = append(problems, fmt.Sprintf("the project files add up to %d files and %d bytes; at most %d files and %d MiB are shipped with a deploy: put large or many files in the image (COPY in the Dockerfile) or in a named volume",
			count, total, MaxConfigFiles, MaxConfigAppSize>>20))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s; nothing was changed", core.ErrInvalid, strings.Join(problems, "; "))
	}
	return nil
}

// readConfig reads one config's source under dir: a file, or every
// regular file of a directory (walked in lexical order).
func readConfig(dir string, c core.ConfigFile) ([]core.ConfigFile, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	full := filepath.Join(dir, filepath.FromSlash(c.Source))
	real, err := filepath.EvalSymlinks(full)
	if errors.Is(err, fs.ErrNotExist) {
		abs, _ := filepath.Abs(dir)
		return nil, fmt.Errorf("no such file or directory in %s: create it, or correct source (it is relative to the manifest's directory)", abs)
	}
	if err != nil {
		return nil, err
	}
	if rel, rerr := filepath.Rel(root, real); rerr != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return nil, fmt.Errorf("%s leads outside the project directory %s (to %s): %s", full, dir, real, configRule)
	}
	st, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if st.Mode().IsRegular() {
		f, err := configFile(real, c.Source, c.Path, c.Mode)
		if err != nil {
			return nil, err
		}
		return []core.ConfigFile{f}, nil
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is neither a file nor a directory", full)
	}
	var out []core.ConfigFile
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file (a link or a device): only files are shipped", p)
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		f, err := configFile(p, path.Join(c.Source, rel), path.Join(c.Path, rel), c.Mode)
		if err != nil {
			return err
		}
		out = append(out, f)
		if len(out) > MaxConfigFiles {
			return fmt.Errorf("more than %d files: put them in the image (COPY in the Dockerfile) or in a named volume", MaxConfigFiles)
		}
		return nil
	})
	return out, err
}

// configFile reads one file: its content (at most MaxConfigFileSize),
// digest and mode (mode when non-zero).
func configFile(p, source, target string, mode uint32) (core.ConfigFile, error) {
	st, err := os.Stat(p)
	if err != nil {
		return core.ConfigFile{}, err
	}
	if st.Size() > MaxConfigFileSize {
		return core.ConfigFile{}, fmt.Errorf("%s is %d bytes; a project file is shipped up to %d KiB: put it in the image (COPY in the Dockerfile) or in a named volume", p, st.Size(), MaxConfigFileSize>>10)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return core.ConfigFile{}, err
	}
	if mode == 0 {
		mode = ConfigModeFile
		if st.Mode().Perm()&0o100 != 0 {
			mode = ConfigModeExec
		}
	}
	sum := sha256.Sum256(data)
	return core.ConfigFile{Source: source, Path: target, Mode: mode, Digest: hex.EncodeToString(sum[:]), Data: data}, nil
}

// Project file modes and bounds (SPEC R82): one file, and all the files
// of an app (a Docker config on a swarm holds at most 1000 KiB).
const (
	ConfigModeFile    = 0o444
	ConfigModeExec    = 0o555
	MaxConfigFileSize = 500 << 10
	MaxConfigAppSize  = 4 << 20
	MaxConfigFiles    = 256
)
