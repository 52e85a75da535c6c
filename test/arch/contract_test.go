// Package arch holds tests of the tree's shape rather than its behaviour:
// what the plugin side compiles against (the contract, never the engine),
// the size limits of files and functions, and which packages may know the
// edge's files.
package arch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/gordon-deploy/docker-gordon"

// contractLineBudget is the most project Go (non-test, non-generated
// lines) a probe plugin may compile against, the SDK's probe side and the
// plugin's own package included. 3,020: the route graph and the service
// spec carry scale to zero (SPEC R81), which a traffic plugin must see.
const contractLineBudget = 3020

// listedPackage is the part of `go list -json` the contract tests read.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Standard   bool
}

// goListDeps returns the project packages pattern compiles against (itself
// included, tests excluded), keyed by import path.
func goListDeps(t *testing.T, patterns ...string) map[string]listedPackage {
	t.Helper()
	gobin, err := exec.LookPath("go")
	require.NoError(t, err, "the contract tests run `go list`; put go on PATH")
	cmd := exec.Command(gobin, append([]string{"list", "-deps", "-json"}, patterns...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list -deps %v: %s", patterns, stderr.String())
	deps := map[string]listedPackage{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		if !p.Standard && (p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/")) {
			deps[p.ImportPath] = p
		}
	}
	require.NotEmpty(t, deps, "go list -deps %v listed no project package", patterns)
	return deps
}

// goListDepPaths returns, for every package patterns match, the import
// paths of every package it compiles against (tests excluded).
func goListDepPaths(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-f", "{{.ImportPath}}{{range .Deps}} {{.}}{{end}}"}, patterns...)
	out, err := exec.Command("go", args...).Output()
	require.NoError(t, err, "go list %v", patterns)
	deps := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		deps[f[0]] = f[1:]
	}
	require.NotEmpty(t, deps, "go list %v", patterns)
	return deps
}

// generated reports whether a Go file is generated code: a *.pb.go file
// or one with the standard "Code generated … DO NOT EDIT." header.
func generated(t *testing.T, path string) bool {
	if strings.HasSuffix(path, ".pb.go") {
		return true
	}
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "package ") {
			return false
		}
		if strings.HasPrefix(line, "// Code generated ") && strings.HasSuffix(line, " DO NOT EDIT.") {
			return true
		}
	}
	return false
}

// projectLines counts the non-test, non-generated lines of deps.
func projectLines(t *testing.T, deps map[string]listedPackage) int {
	t.Helper()
	n := 0
	for _, p := range deps {
		for _, name := range append(append([]string{}, p.GoFiles...), p.CgoFiles...) {
			path := filepath.Join(p.Dir, name)
			if generated(t, path) {
				continue
			}
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			n += bytes.Count(data, []byte("\n"))
		}
	}
	return n
}

// forbiddenForPlugins reports why a plugin must not compile against path
// ("" when it may): the engine and everything beside the contract in
// core, and the edge except the route graph types the Traffic contract
// carries.
func forbiddenForPlugins(path string) string {
	switch {
	case path == module+"/core", path == module+"/core/routetable":
		return ""
	case strings.HasPrefix(path, module+"/core/"):
		return "the engine side of core (core/engine, core/coretest, core/manifest, core/compose)"
	case path == module+"/edgeproxy" || strings.HasPrefix(path, module+"/edgeproxy/"):
		return "the edge proxy (the route graph types it shares are core/routetable)"
	case path == module+"/journal" || strings.HasPrefix(path, module+"/journal/"),
		strings.HasPrefix(path, module+"/cmd/"):
		return "the host side (journal, commands)"
	}
	return ""
}

// ARCHITECTURE §1: the SDK and the probe plugins compile against the
// contract in core, never the engine.
func TestContract_PluginSideImportsNoEngine(t *testing.T) {
	deps := goListDepPaths(t, module+"/plugins/sdk/probe", module+"/plugins/sdk/runtime", module+"/plugins/sdk/traffic",
		module+"/plugins/probe/...", module+"/plugins/examples/...")
	require.Contains(t, deps, module+"/plugins/sdk/probe")
	require.Contains(t, deps[module+"/plugins/sdk/probe"], module+"/core", "the contract is in the probe SDK's deps (the listing works)")
	for root, paths := range deps {
		for _, path := range paths {
			if why := forbiddenForPlugins(path); why != "" {
				t.Errorf("%s compiles against %s: %s", root, path, why)
			}
		}
	}
}

// No package under plugins/ (built-ins, SDK, examples) compiles against
// the engine or its test fakes.
func TestContract_NoPluginImportsTheEngine(t *testing.T) {
	deps := goListDepPaths(t, module+"/plugins/...")
	require.Contains(t, deps, module+"/plugins/runtime/docker")
	for root, paths := range deps {
		for _, path := range paths {
			if path == module+"/core/engine" || strings.HasPrefix(path, module+"/core/engine/") || path == module+"/core/coretest" {
				t.Errorf("%s compiles against %s", root, path)
			}
		}
	}
}

// The SDK's probe side and every example probe plugin compile against at
// most contractLineBudget lines of the project's Go.
func TestContract_ProbePluginsCompileAgainstASmallContract(t *testing.T) {
	roots := []string{
		"plugins/sdk/probe",
		"plugins/probe/http", "plugins/probe/tcp", "plugins/probe/log",
		"plugins/examples/execprobe", "plugins/examples/grpcprobe",
	}
	for _, root := range roots {
		deps := goListDeps(t, module+"/"+root)
		n := projectLines(t, deps)
		paths := make([]string, 0, len(deps))
		for p := range deps {
			paths = append(paths, strings.TrimPrefix(p, module+"/"))
		}
		sort.Strings(paths)
		t.Logf("%s compiles against %d lines of project Go in %d packages: %s", root, n, len(deps), strings.Join(paths, " "))
		assert.LessOrEqual(t, n, contractLineBudget, "%s: project Go it compiles against", root)
	}
	all := goListDeps(t, module+"/plugins/sdk/...")
	t.Logf("plugins/sdk/... (all non-test packages together) compiles against %d lines of project Go in %d packages", projectLines(t, all), len(all))
}
