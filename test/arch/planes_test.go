package arch

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The two planes' shape: the app plane (core, core/engine, plugins) and
// the system plane (system/) beside it, under a thin CLI
// (docs/architecture.md).

const (
	// maxCLILines bounds cmd/docker-gordon's non-test lines: verbs, flags
	// and rendering.
	maxCLILines = 5000
)

// temporaryPackageAllowance lets a package named here exceed
// maxPackageLines (and, for the CLI, maxCLILines) up to the given
// non-test lines while its cut is under way. TEMPORARY: each entry goes
// when its package is cut; the bound may only go down. Empty: every
// package is cut.
var temporaryPackageAllowance = map[string]int{}

// srcPackage is one directory's non-test Go: its lines (generated files
// aside) and imports.
type srcPackage struct {
	lines   int
	imports map[string][]string // import path -> files importing it
	files   []*ast.File
	names   []string
}

// sourceTree reads every directory's non-test, non-generated Go files,
// keyed by directory relative to the repository root (slash-separated).
func sourceTree(t *testing.T) (map[string]*srcPackage, *token.FileSet) {
	t.Helper()
	root := repoRoot(t)
	fset := token.NewFileSet()
	pkgs := map[string]*srcPackage{}
	for _, rel := range goFiles(t, root) {
		if strings.HasSuffix(rel, "_test.go") || strings.Contains(rel, "testdata") {
			continue
		}
		path := filepath.Join(root, rel)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := pkgs[dir]
		if p == nil {
			p = &srcPackage{imports: map[string][]string{}}
			pkgs[dir] = p
		}
		p.lines += bytes.Count(b, []byte("\n"))
		f, err := parser.ParseFile(fset, path, b, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		p.files, p.names = append(p.files, f), append(p.names, rel)
		for _, im := range f.Imports {
			ip, _ := strconv.Unquote(im.Path.Value)
			p.imports[ip] = append(p.imports[ip], filepath.Base(rel))
		}
	}
	return pkgs, fset
}

func sortedDirs(pkgs map[string]*srcPackage) []string {
	out := make([]string, 0, len(pkgs))
	for d := range pkgs {
		out = append(out, d)
	}
	sort.Strings(out)
	return out
}

// No package is over maxPackageLines non-test, non-generated lines (but
// the CLI, which has maxCLILines, and those of temporaryPackageAllowance,
// up to their bound).
func TestLayout_NoPackageOver4000Lines(t *testing.T) {
	pkgs, _ := sourceTree(t)
	for _, dir := range sortedDirs(pkgs) {
		n, limit := pkgs[dir].lines, maxPackageLines
		if dir == "cmd/docker-gordon" {
			limit = maxCLILines // its own rule: TestLayout_CLIImportsNoRuntimePluginNorEdge
		}
		if a, ok := temporaryPackageAllowance[dir]; ok {
			limit = a
			t.Logf("%s: %d non-test lines, under a temporary allowance of %d (the rule is %d)", dir, n, a, maxPackageLines)
		}
		if n > limit {
			t.Errorf("%s has %d non-test lines (limit %d): cut it along its flows into packages a reader can name", dir, n, limit)
		}
	}
	for dir := range temporaryPackageAllowance {
		if _, ok := pkgs[dir]; !ok {
			t.Errorf("temporaryPackageAllowance names %s, which has no Go files: remove the entry", dir)
		}
	}
}

// The CLI holds verbs, flags and rendering: it imports nothing under
// plugins/runtime/ or edgeproxy/ (it reaches them through system/ or
// plugins/sdk) and stays under maxCLILines.
func TestLayout_CLIImportsNoRuntimePluginNorEdge(t *testing.T) {
	pkgs, _ := sourceTree(t)
	cli := pkgs["cmd/docker-gordon"]
	if cli == nil {
		t.Fatal("no cmd/docker-gordon")
	}
	for ip, files := range cli.imports {
		if strings.HasPrefix(ip, module+"/plugins/runtime/") || ip == module+"/edgeproxy" || strings.HasPrefix(ip, module+"/edgeproxy/") {
			t.Errorf("cmd/docker-gordon imports %s (%s): reach it through system/ or plugins/sdk", ip, strings.Join(files, ", "))
		}
	}
	limit := maxCLILines
	if a, ok := temporaryPackageAllowance["cmd/docker-gordon"]; ok {
		limit = a
	}
	t.Logf("cmd/docker-gordon: %d non-test lines (rule %d, bound now %d)", cli.lines, maxCLILines, limit)
	if cli.lines > limit {
		t.Errorf("cmd/docker-gordon has %d non-test lines (limit %d): move the logic below the verbs into system/ or core/engine", cli.lines, limit)
	}
}

// pluginOf is the plugin a package under plugins/ belongs to
// ("plugins/<kind>/<name>"), or "" for the shared ones: the built-in
// table (plugins), the SDK (plugins/sdk/...) and a kind's internal
// packages (plugins/<kind>/internal/...).
func pluginOf(dir string) string {
	parts := strings.Split(dir, "/")
	if len(parts) < 3 || parts[0] != "plugins" || parts[1] == "sdk" || parts[2] == "internal" {
		return ""
	}
	return strings.Join(parts[:3], "/")
}

// No plugin imports another plugin's package: they meet through the
// contract (core) and the SDK.
func TestLayout_NoPluginImportsAnotherPlugin(t *testing.T) {
	pkgs, _ := sourceTree(t)
	checked := 0
	for _, dir := range sortedDirs(pkgs) {
		own := pluginOf(dir)
		if own == "" {
			continue
		}
		checked++
		for ip, files := range pkgs[dir].imports {
			rel, ok := strings.CutPrefix(ip, module+"/")
			if !ok {
				continue
			}
			if other := pluginOf(rel); other != "" && other != own {
				t.Errorf("%s imports %s, another plugin's package (%s): share it through core or plugins/sdk", dir, ip, strings.Join(files, ", "))
			}
		}
	}
	if checked < 5 {
		t.Fatalf("found only %d plugin packages: wrong tree?", checked)
	}
}

// system/ is the system plane below the CLI: it imports no cmd/... and no
// plugins/... but plugins/sdk.
func TestLayout_SystemImportsNoCLINorPlugin(t *testing.T) {
	pkgs, _ := sourceTree(t)
	checked := 0
	for _, dir := range sortedDirs(pkgs) {
		if dir != "system" && !strings.HasPrefix(dir, "system/") {
			continue
		}
		checked++
		for ip, files := range pkgs[dir].imports {
			switch {
			case strings.HasPrefix(ip, module+"/cmd/"),
				strings.HasPrefix(ip, module+"/plugins") && ip != module+"/plugins/sdk" && !strings.HasPrefix(ip, module+"/plugins/sdk/"):
				t.Errorf("%s imports %s (%s): the system plane stands below the CLI and beside the plugins", dir, ip, strings.Join(files, ", "))
			}
		}
	}
	if checked < 4 {
		t.Fatalf("found only %d packages under system/: wrong tree?", checked)
	}
}

// platformFile is the one place that decides whether a state directory
// is served by one engine or a swarm.
const platformFile = "system/platform.go"

// The platform is decided in one place: system/swarm's Present (does this
// state directory serve a swarm?) is called only in system/platform.go;
// everything else asks system.Platform.
func TestLayout_PlatformIsDecidedInOnePlace(t *testing.T) {
	pkgs, fset := sourceTree(t)
	calls := 0
	for _, dir := range sortedDirs(pkgs) {
		p := pkgs[dir]
		for i, f := range p.files {
			local := ""
			for _, im := range f.Imports {
				if ip, _ := strconv.Unquote(im.Path.Value); ip == module+"/system/swarm" {
					local = "swarm"
					if im.Name != nil {
						local = im.Name.Name
					}
				}
			}
			inSwarm := dir == "system/swarm"
			if local == "" && !inSwarm {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				hit := false
				switch fn := call.Fun.(type) {
				case *ast.SelectorExpr:
					x, ok := fn.X.(*ast.Ident)
					hit = ok && x.Name == local && fn.Sel.Name == "Present"
				case *ast.Ident:
					hit = inSwarm && fn.Name == "Present"
				}
				if !hit {
					return true
				}
				calls++
				if p.names[i] != platformFile {
					t.Errorf("%s calls system/swarm's Present (%s): ask system.Platform (Resolve) instead; the platform is decided in %s only", p.names[i], fset.Position(call.Pos()), platformFile)
				}
				return true
			})
		}
	}
	if calls == 0 {
		t.Errorf("%s does not call system/swarm's Present: where is the platform decided now? Update this rule", platformFile)
	}
}
