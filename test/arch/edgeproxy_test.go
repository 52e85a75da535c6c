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

// The edge's package cut. Each package under edgeproxy/ serves
// one seam and says which requests in its doc.go; none, the root that
// wires them included, exceeds maxPackageLines non-test lines.
const (
	maxPackageLines = 4000
	modulePath      = "github.com/gordon-deploy/docker-gordon"
)

// edgeproxyPackages are the packages under edgeproxy/ (directories,
// relative to it). A new one is added here, with its doc.go.
var edgeproxyPackages = []string{".", "certshare", "certstore", "control", "edgestate", "internal/accesslog", "internal/dataplane", "internal/edgetls", "internal/evloop", "internal/h1wire", "internal/h2srv", "internal/handoff", "internal/l4", "internal/policy", "internal/routepush", "internal/upstream", "internal/wake"}

// edgeproxyLeaves import nothing of this module: the seams everything
// else builds on.
var edgeproxyLeaves = []string{"edgestate", "internal/accesslog", "internal/evloop", "internal/h1wire"}

type goPackage struct {
	lines   int      // newlines in its non-test files, every build tag
	imports []string // of its non-test files
	hasDoc  bool
}

// edgeproxyTree reads every Go package under edgeproxy/, keyed by its
// directory relative to edgeproxy/ ("." for the root).
func edgeproxyTree(t *testing.T) map[string]*goPackage {
	t.Helper()
	base := filepath.Join(repoRoot(t), "edgeproxy")
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

func TestLayout_EdgeproxyPackages(t *testing.T) {
	pkgs := edgeproxyTree(t)
	for _, want := range edgeproxyPackages {
		if pkgs[want] == nil {
			t.Errorf("edgeproxy/%s is gone: update edgeproxyPackages", want)
		}
	}
	for dir, pkg := range pkgs {
		t.Logf("edgeproxy/%s: %d non-test lines", dir, pkg.lines)
		if !slices.Contains(edgeproxyPackages, dir) {
			t.Errorf("edgeproxy/%s is not in edgeproxyPackages: add it (with a doc.go saying which requests it serves)", dir)
		}
		if !pkg.hasDoc {
			t.Errorf("edgeproxy/%s has no doc.go: say which requests it serves", dir)
		}
		if pkg.lines > maxPackageLines {
			t.Errorf("edgeproxy/%s has %d non-test lines (limit %d): cut it along a seam into its own package, do not grow it", dir, pkg.lines, maxPackageLines)
		}
	}
}

// Sub-packages never import the root: the root wires them (an import
// the other way would be a cycle, or the root regrowing under a new name).
func TestLayout_EdgeproxySubpackagesDoNotImportRoot(t *testing.T) {
	for dir, pkg := range edgeproxyTree(t) {
		if dir == "." {
			continue
		}
		for _, im := range pkg.imports {
			if im == modulePath+"/edgeproxy" {
				t.Errorf("edgeproxy/%s imports edgeproxy: move what it needs down into it, or into a lower package", dir)
			}
			if slices.Contains(edgeproxyLeaves, dir) && strings.HasPrefix(im, modulePath+"/") {
				t.Errorf("edgeproxy/%s imports %s: it is a leaf (edgeproxyLeaves), it imports nothing of this module", dir, im)
			}
		}
	}
}
