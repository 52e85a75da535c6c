package arch

import (
	"bytes"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// engineLayers are the packages of core/engine, lowest first: each may
// import the ones before it and none after it. The root (".") is the
// facade over all of them; readiness keeps no engine state.
var engineLayers = []string{"readiness", "steps", "oprun", "volsnap", "deploy", "jobs", "lifecycle", "reconcile", "prune", "scalezero", "."}

// engineTree reads every Go package under core/engine, keyed by its
// directory relative to it ("." for the facade).
func engineTree(t *testing.T) map[string]*goPackage {
	t.Helper()
	base := filepath.Join(repoRoot(t), "core", "engine")
	fset := token.NewFileSet()
	pkgs := map[string]*goPackage{}
	err := filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(base, filepath.Dir(p))
		rel = filepath.ToSlash(rel)
		pkg := pkgs[rel]
		if pkg == nil {
			pkg = &goPackage{}
			pkgs[rel] = pkg
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		pkg.lines += bytes.Count(b, []byte("\n"))
		pkg.hasDoc = pkg.hasDoc || d.Name() == "doc.go"
		f, err := parser.ParseFile(fset, p, b, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			pkg.imports = append(pkg.imports, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestLayout_EnginePackages: core/engine is cut along its flows. Every
// package is a known layer with a doc.go, none exceeds maxPackageLines
// non-test lines, and a layer imports only the layers below it.
func TestLayout_EnginePackages(t *testing.T) {
	pkgs := engineTree(t)
	for _, want := range engineLayers {
		if pkgs[want] == nil {
			t.Errorf("core/engine/%s is gone: update engineLayers", want)
		}
	}
	for dir, pkg := range pkgs {
		t.Logf("core/engine/%s: %d non-test lines", dir, pkg.lines)
		at := slices.Index(engineLayers, dir)
		if at < 0 {
			t.Errorf("core/engine/%s is not in engineLayers: add it at its layer (with a doc.go saying what it owns)", dir)
			continue
		}
		if !pkg.hasDoc {
			t.Errorf("core/engine/%s has no doc.go: say what it owns", dir)
		}
		if pkg.lines > maxPackageLines {
			t.Errorf("core/engine/%s has %d non-test lines (limit %d): cut it along a flow into its own package, do not grow it", dir, pkg.lines, maxPackageLines)
		}
		for _, im := range pkg.imports {
			sub, ok := strings.CutPrefix(im, modulePath+"/core/engine")
			if !ok || (sub != "" && !strings.HasPrefix(sub, "/")) {
				continue
			}
			sub = strings.TrimPrefix(sub, "/")
			if sub == "" {
				sub = "."
			}
			if i := slices.Index(engineLayers, sub); i >= at {
				t.Errorf("core/engine/%s imports core/engine/%s, a layer above it: move what it needs down", dir, sub)
			}
		}
	}
}
