package compose

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/gordon-deploy/docker-gordon/core/manifest"
)

// Project files (SPEC R82): compose configs with file:, and binds of
// files or read-only directories inside the project directory, become
// [[config]] entries shipped with the deploy.

// topConfigs checks the top-level configs: file: is shipped; the other
// sources are refused with what to do.
func (m *mapper) topConfigs(v any) {
	defs, _ := v.(map[string]any)
	for name, raw := range defs {
		def, _ := raw.(map[string]any)
		for key := range def {
			switch key {
			case "file", "name", "labels":
			case "content", "environment":
				m.refuse("configs."+name+"."+key, "a config from %s is not supported yet: write it to a file of the project and give file: PATH", key)
			case "external":
				m.refuse("configs."+name+".external", "an external config is not supported: docker gordon ships the project's files itself; give file: PATH")
			default:
				m.refuse("configs."+name+"."+key, "not supported: %s of a config; remove it", key)
			}
		}
	}
}

// configsOf maps a service's configs: each file: config becomes a
// [[config]] at its target (default /<name>, as compose), with its mode.
func (m *mapper) configsOf(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name + ".configs"
	for i, c := range svc.Configs {
		key := m.writtenKey(fmt.Sprintf("%s[%d]", base, i), base)
		def, ok := m.p.Configs[c.Source]
		if !ok {
			m.refuse(key, "config %s is not declared under top-level configs:", c.Source)
			continue
		}
		if def.File == "" {
			continue // refused at the top level
		}
		if c.UID != "" || c.GID != "" {
			m.refuse(key, "config uid and gid are not supported yet: the file is owned by root and readable by all; remove them")
		}
		target := c.Target
		if target == "" {
			target = "/" + c.Source
		}
		var mode int64
		if c.Mode != nil {
			mode = int64(*c.Mode)
			if mode&0o222 != 0 {
				m.refuse(key, "config mode %#o has write bits: a config is read-only; give 0444 (or 0555 for a script)", mode)
				continue
			}
		}
		if m.projectFile(key, filepath.Clean(def.File), target, mode, false, out) {
			m.from(fmt.Sprintf("services.%s.config[%d]", name, len(out.Config)-1), key)
		}
	}
}

// projectFile ships the file or directory src (absolute, inside the
// project directory) at target: it checks that it exists and is within
// the bounds, and adds a [[config]]; a directory must be mounted
// read-only (not writable) or it is data, refused with the advice to use a
// named volume. It reports whether it added one.
func (m *mapper) projectFile(key, src, target string, mode int64, writable bool, out *service) bool {
	rel, inside := m.inProject(src)
	if !inside {
		shown := src
		if r, err := filepath.Rel(m.p.WorkingDir, src); err == nil {
			shown = filepath.ToSlash(r)
		}
		m.refuse(key, "%s is outside the project directory: only the project's own files are shipped with the deploy; move it into the project, or have the operator approve it as a bind", shown)
		return false
	}
	st, err := os.Stat(src)
	if (err == nil && st.IsDir() || err != nil) && writable {
		m.refuse(key, "./%s → %s is a writable directory of the project: the container may write its data there, and a deploy ships only read-only files; use a named volume (NAME:%s, declared under top-level volumes:), or add :ro if the container only reads it (its files are then shipped with each deploy)", rel, target, target)
		return false
	}
	if err != nil {
		m.refuse(key, "./%s: no such file or directory in the project: create it, or remove the mount", rel)
		return false
	}
	if msg := projectFileBounds(src, st); msg != "" {
		m.refuse(key, "./%s: %s", rel, msg)
		return false
	}
	e := configEntry{Source: "./" + rel, Path: target}
	if mode != 0 {
		e.Mode = fmt.Sprintf("%04o", mode)
	}
	out.Config = append(out.Config, e)
	return true
}

// inProject returns p relative to the project directory (slash-separated)
// and whether it lies inside it.
func (m *mapper) inProject(p string) (string, bool) {
	if m.p.WorkingDir == "" {
		return "", false
	}
	rel, err := filepath.Rel(m.p.WorkingDir, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// projectFileBounds says why the file or directory at p cannot be shipped
// ("" when it can): a file over manifest.MaxConfigFileSize, a directory with
// more than manifest.MaxConfigFiles files, over manifest.MaxConfigAppSize, or
// holding something other than files and directories.
func projectFileBounds(p string, st fs.FileInfo) string {
	tooBig := "put it in the image (COPY in the Dockerfile) or in a named volume"
	if !st.IsDir() {
		if st.Size() > manifest.MaxConfigFileSize {
			return fmt.Sprintf("%d bytes; a project file is shipped up to %d KiB: %s", st.Size(), manifest.MaxConfigFileSize>>10, tooBig)
		}
		return ""
	}
	var n int
	var total int64
	msg := ""
	_ = filepath.WalkDir(p, func(f string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			msg = err.Error()
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			msg = fmt.Sprintf("%s is not a regular file (a link or a device): only files are shipped; %s", path.Base(f), tooBig)
		default:
			info, ierr := d.Info()
			if ierr != nil {
				msg = ierr.Error()
				break
			}
			n, total = n+1, total+info.Size()
			if info.Size() > manifest.MaxConfigFileSize {
				msg = fmt.Sprintf("%s is %d bytes; a project file is shipped up to %d KiB: %s", path.Base(f), info.Size(), manifest.MaxConfigFileSize>>10, tooBig)
			} else if n > manifest.MaxConfigFiles || total > manifest.MaxConfigAppSize {
				msg = fmt.Sprintf("a directory is shipped up to %d files and %d MiB: %s", manifest.MaxConfigFiles, manifest.MaxConfigAppSize>>20, tooBig)
			}
		}
		if msg != "" {
			return fs.SkipAll
		}
		return nil
	})
	return msg
}
