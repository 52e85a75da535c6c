package main

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// autoBound: a test that waits with Eventually for less than this is
// timing-sensitive and selected automatically.
const autoBound = 5 * time.Second

// list is tests.txt: explicit entries and the automatic scan's packages.
type list struct {
	entries []entry
	// auto are the package patterns scanned for Eventually under autoBound;
	// exclude are patterns left out of that scan.
	auto, exclude []string
}

// entry is one line "<package pattern> <test name regexp>".
type entry struct {
	line    int
	pattern string
	re      *regexp.Regexp
}

// pkg is one Go package with its test functions.
type pkg struct {
	ImportPath, Dir string
	files           []string // its test files and Go files, absolute
}

// selected is one test to stress, with why it was selected.
type selected struct {
	pkg  *pkg
	name string
	why  string
}

// readList parses path. Lines: "# comment", "auto <pattern>...",
// "exclude <pattern>...", "<pattern> <regexp>".
func readList(path string) (*list, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	l := &list{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch fields[0] {
		case "auto":
			l.auto = append(l.auto, fields[1:]...)
			continue
		case "exclude":
			l.exclude = append(l.exclude, fields[1:]...)
			continue
		}
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"<package pattern> <test name regexp>\"", path, n)
		}
		re, err := regexp.Compile(fields[1])
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		l.entries = append(l.entries, entry{line: n, pattern: fields[0], re: re})
	}
	return l, sc.Err()
}

// goList returns the packages matching patterns (go list), by import path.
func goList(patterns ...string) ([]*pkg, error) {
	if len(patterns) == 0 {
		return nil, nil
	}
	args := append([]string{"list", "-e", "-f",
		"{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \",\"}}\t{{join .TestGoFiles \",\"}}\t{{join .XTestGoFiles \",\"}}"}, patterns...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w", strings.Join(patterns, " "), err)
	}
	var pkgs []*pkg
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("go list %s: unexpected line %q", strings.Join(patterns, " "), line)
		}
		p := &pkg{ImportPath: f[0], Dir: f[1]}
		for _, names := range f[2:] {
			for _, n := range strings.Split(names, ",") {
				if n != "" {
					p.files = append(p.files, filepath.Join(p.Dir, n))
				}
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// parsed is a package's test functions and constants.
type parsed struct {
	tests  map[string]*ast.FuncDecl
	consts map[string]ast.Expr
}

func parsePkg(p *pkg) (*parsed, error) {
	ps := &parsed{tests: map[string]*ast.FuncDecl{}, consts: map[string]ast.Expr{}}
	fset := token.NewFileSet()
	for _, path := range p.files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		collectConsts(f, ps.consts)
		if !strings.HasSuffix(path, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if ok && fd.Recv == nil && fd.Body != nil && isTestName(fd.Name.Name) {
				ps.tests[fd.Name.Name] = fd
			}
		}
	}
	return ps, nil
}

func isTestName(n string) bool {
	if !strings.HasPrefix(n, "Test") || n == "TestMain" {
		return false
	}
	rest := n[len("Test"):]
	return rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z')
}

// collectConsts adds every constant declared in n (package level or in a
// function) to consts, by name.
func collectConsts(n ast.Node, consts map[string]ast.Expr) {
	ast.Inspect(n, func(n ast.Node) bool {
		gd, ok := n.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			return true
		}
		for _, s := range gd.Specs {
			vs := s.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					consts[name.Name] = vs.Values[i]
				}
			}
		}
		return true
	})
}

// shortestEventually returns the shortest bound of an Eventually call
// in fd (testify: require/assert.Eventually, EventuallyWithT and their f
// forms, and the methods of assert.New) that evaluates to a constant.
func shortestEventually(fd *ast.FuncDecl, consts map[string]ast.Expr) (time.Duration, bool) {
	local := map[string]ast.Expr{}
	for k, v := range consts {
		local[k] = v
	}
	collectConsts(fd.Body, local)
	best, found := time.Duration(0), false
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasPrefix(sel.Sel.Name, "Eventually") {
			return true
		}
		i := 1 // a method of assert.New(t): (condition, waitFor, tick)
		if x, ok := sel.X.(*ast.Ident); ok && (x.Name == "require" || x.Name == "assert") {
			i = 2 // (t, condition, waitFor, tick)
		}
		if len(call.Args) <= i {
			return true
		}
		if d, ok := evalDuration(call.Args[i], local, 0); ok && (!found || d < best) {
			best, found = d, true
		}
		return true
	})
	return best, found
}

var timeUnits = map[string]float64{
	"Nanosecond": 1, "Microsecond": 1e3, "Millisecond": 1e6, "Second": 1e9, "Minute": 60e9, "Hour": 3600e9,
}

// evalDuration evaluates a constant duration expression: literals, time
// units, constants, + - * / and conversions.
func evalDuration(e ast.Expr, consts map[string]ast.Expr, depth int) (time.Duration, bool) {
	v, ok := evalNum(e, consts, depth)
	return time.Duration(v), ok
}

func evalNum(e ast.Expr, consts map[string]ast.Expr, depth int) (float64, bool) {
	if depth > 10 {
		return 0, false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT && e.Kind != token.FLOAT {
			return 0, false
		}
		v, err := strconv.ParseFloat(strings.ReplaceAll(e.Value, "_", ""), 64)
		return v, err == nil
	case *ast.ParenExpr:
		return evalNum(e.X, consts, depth+1)
	case *ast.SelectorExpr:
		if x, ok := e.X.(*ast.Ident); ok && x.Name == "time" {
			v, ok := timeUnits[e.Sel.Name]
			return v, ok
		}
	case *ast.Ident:
		if c, ok := consts[e.Name]; ok {
			return evalNum(c, consts, depth+1)
		}
	case *ast.CallExpr: // time.Duration(x)
		if len(e.Args) == 1 {
			return evalNum(e.Args[0], consts, depth+1)
		}
	case *ast.BinaryExpr:
		a, ok1 := evalNum(e.X, consts, depth+1)
		b, ok2 := evalNum(e.Y, consts, depth+1)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch e.Op {
		case token.MUL:
			return a * b, true
		case token.QUO:
			if b != 0 {
				return a / b, true
			}
		case token.ADD:
			return a + b, true
		case token.SUB:
			return a - b, true
		}
	}
	return 0, false
}

// selectTests returns the tests tests.txt names and the automatic scan
// finds, sorted by package and name. An entry that selects nothing is an
// error: a renamed or moved test must not silently drop out.
func selectTests(l *list) ([]selected, error) {
	byPath := map[string]*parsed{}
	parse := func(p *pkg) (*parsed, error) {
		if ps, ok := byPath[p.ImportPath]; ok {
			return ps, nil
		}
		ps, err := parsePkg(p)
		byPath[p.ImportPath] = ps
		return ps, err
	}
	seen := map[string]*selected{}
	add := func(p *pkg, name, why string) {
		key := p.ImportPath + " " + name
		if s, ok := seen[key]; ok {
			if !strings.Contains(s.why, why) {
				s.why += "; " + why
			}
			return
		}
		seen[key] = &selected{pkg: p, name: name, why: why}
	}
	for _, e := range l.entries {
		pkgs, err := goList(e.pattern)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, p := range pkgs {
			ps, err := parse(p)
			if err != nil {
				return nil, err
			}
			for name := range ps.tests {
				if e.re.MatchString(name) {
					add(p, name, "listed "+e.re.String())
					n++
				}
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("tests.txt:%d: no test in %s matches %s", e.line, e.pattern, e.re)
		}
	}
	if err := selectAuto(l, parse, add); err != nil {
		return nil, err
	}
	out := make([]selected, 0, len(seen))
	for _, s := range seen {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].pkg.ImportPath != out[j].pkg.ImportPath {
			return out[i].pkg.ImportPath < out[j].pkg.ImportPath
		}
		return out[i].name < out[j].name
	})
	return out, nil
}

// selectAuto adds every test of the auto packages (minus the excluded
// ones) whose shortest Eventually bound is under autoBound.
func selectAuto(l *list, parse func(*pkg) (*parsed, error), add func(*pkg, string, string)) error {
	pkgs, err := goList(l.auto...)
	if err != nil {
		return err
	}
	excluded, err := goList(l.exclude...)
	if err != nil {
		return err
	}
	skip := map[string]bool{}
	for _, p := range excluded {
		skip[p.ImportPath] = true
	}
	for _, p := range pkgs {
		if skip[p.ImportPath] {
			continue
		}
		ps, err := parse(p)
		if err != nil {
			return err
		}
		for name, fd := range ps.tests {
			if d, ok := shortestEventually(fd, ps.consts); ok && d < autoBound {
				add(p, name, "Eventually "+d.String())
			}
		}
	}
	return nil
}
