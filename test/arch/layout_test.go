package arch

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

const (
	// maxFileLines bounds every non-generated Go file, tests included.
	maxFileLines = 700
	// maxFuncLines bounds every non-test function declaration, counted from
	// its func keyword to its closing brace.
	maxFuncLines = 100
)

// repoRoot is the module root: two levels above this file.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("runtime.Caller failed")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// goFiles lists the repository's non-generated Go files, relative to root.
func goFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || generated(t, p) {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		out = append(out, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("found only %d Go files under %s: wrong root?", len(out), root)
	}
	return out
}

func TestLayout_NoGoFileOver700Lines(t *testing.T) {
	root := repoRoot(t)
	longest, longestName := 0, ""
	for _, rel := range goFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(b, []byte("\n"))
		if n > longest {
			longest, longestName = n, rel
		}
		if n > maxFileLines {
			t.Errorf("%s has %d lines (limit %d): cut it along a seam", rel, n, maxFileLines)
		}
	}
	t.Logf("longest file: %s, %d lines", longestName, longest)
}

func TestLayout_NoFunctionOver100Lines(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	longest, longestName := 0, ""
	for _, rel := range goFiles(t, root) {
		if strings.HasSuffix(rel, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			name := rel + ": " + fd.Name.Name
			if n > longest {
				longest, longestName = n, name
			}
			if n > maxFuncLines {
				t.Errorf("%s is %d lines (limit %d): make it a sequence of named steps", name, n, maxFuncLines)
			}
		}
	}
	t.Logf("longest function: %s, %d lines", longestName, longest)
}

// edgeFiles are the names of files only the edge and its traffic backend
// may know (R16, R60): the CLI asks the traffic backend instead.
var edgeFiles = []string{"status.json", "routes.json", "applied.json", "handover.sock", "/healthz", "edge/certs"}

func TestLayout_CLINamesNoEdgeFile(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	dir := filepath.Join(root, "cmd", "docker-gordon")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, ef := range edgeFiles {
				if strings.Contains(s, ef) {
					t.Errorf("%s names the edge's %q (%s): ask the traffic backend", name, ef, fset.Position(lit.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no Go files in cmd/docker-gordon")
	}
}
