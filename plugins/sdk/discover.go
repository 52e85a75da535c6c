package sdk

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Found is one plugin the host can launch.
type Found struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Path is the executable: the docker-gordon binary itself for built-ins.
	Path string `json:"path"`
	// Builtin plugins ship inside docker-gordon and are launched by
	// re-executing it with GORDON_PLUGIN=<kind>/<name>.
	Builtin bool `json:"builtin"`
	// Shadowed is set on a custom plugin that is ignored because a built-in
	// or an earlier plugin directory provides the same kind/name.
	Shadowed bool `json:"shadowed,omitempty"`
}

// ID returns "<kind>/<name>".
func (f Found) ID() string { return f.Kind + "/" + f.Name }

// Discover lists the custom plugins in dirs, in order: executables named
// gordon-<kind>-<name> with kind runtime, probe or traffic (ARCHITECTURE
// §1). A missing or unreadable directory is skipped. A plugin whose
// kind/name is in builtins, or was found in an earlier directory, is
// reported with Shadowed set and is never launched: built-ins always win
// so a stray file on the plugin path cannot replace the runtime the engine
// was tested with. Within one directory, entries are sorted by name.
func Discover(dirs []string, builtins []string) []Found {
	taken := map[string]bool{}
	for _, id := range builtins {
		taken[id] = true
	}
	var out []Found
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
		for _, e := range entries {
			kind, name, ok := parseExecName(e.Name())
			if !ok {
				continue
			}
			path := filepath.Join(dir, e.Name())
			if !isExecutable(path) {
				continue
			}
			f := Found{Kind: kind, Name: name, Path: path}
			if taken[f.ID()] {
				f.Shadowed = true
			}
			taken[f.ID()] = true
			out = append(out, f)
		}
	}
	return out
}

// parseExecName splits "gordon-<kind>-<name>".
func parseExecName(file string) (kind, name string, ok bool) {
	rest, ok := strings.CutPrefix(file, "gordon-")
	if !ok {
		return "", "", false
	}
	kind, name, ok = strings.Cut(rest, "-")
	if !ok || !ValidKind(kind) || name == "" {
		return "", "", false
	}
	return kind, name, true
}

func isExecutable(path string) bool {
	st, err := os.Stat(path) // follows symlinks
	return err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0
}
