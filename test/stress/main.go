// Command stress runs the timing-sensitive tests many times under the race
// detector, with a CPU hog on one core beside them, and fails on any
// failure (make stress; it is not part of make test).
//
// The tests are those test/stress/tests.txt names (a package pattern and a
// test name regexp per line) and, found automatically, every test of the
// "auto" packages that waits with testify's Eventually for less than 5 s
// (a constant bound). Tests are selected by package and name, never by
// file. Each package's selected tests run in one `go test -race -json
// -count=N` (N: -count, default 20); the report lists every test with its
// runs, passes, skips and failures, and the output of each failed run.
//
// Usage: go run ./test/stress [-count N] [-run REGEXP] [-list] [-hog=false]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

func main() {
	file := flag.String("file", "test/stress/tests.txt", "the list of tests")
	count := flag.Int("count", 20, "runs of each test")
	run := flag.String("run", "", "only the selected tests whose name matches this regexp")
	listOnly := flag.Bool("list", false, "print the selection and exit")
	hog := flag.Bool("hog", true, "keep one core busy while the tests run")
	timeout := flag.Duration("timeout", 30*time.Minute, "bound of each package's go test")
	flag.Parse()
	if err := stress(*file, *count, *run, *listOnly, *hog, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "stress:", err)
		os.Exit(1)
	}
}

func stress(file string, count int, run string, listOnly, hog bool, timeout time.Duration) error {
	l, err := readList(file)
	if err != nil {
		return err
	}
	sel, err := selectTests(l)
	if err != nil {
		return err
	}
	if run != "" {
		re, err := regexp.Compile(run)
		if err != nil {
			return fmt.Errorf("-run: %v", err)
		}
		kept := sel[:0]
		for _, s := range sel {
			if re.MatchString(s.name) {
				kept = append(kept, s)
			}
		}
		sel = kept
	}
	if len(sel) == 0 {
		return fmt.Errorf("no test selected")
	}
	if listOnly {
		tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
		for _, s := range sel {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.pkg.ImportPath, s.name, s.why)
		}
		return tw.Flush()
	}
	if hog {
		stop := startHog()
		defer stop() // the hog is a goroutine of this process: it ends with it in any case
	}
	start := time.Now()
	results := map[string]*result{}
	var order []string
	byPkg := map[string][]selected{}
	var pkgs []string
	for _, s := range sel {
		if _, ok := byPkg[s.pkg.ImportPath]; !ok {
			pkgs = append(pkgs, s.pkg.ImportPath)
		}
		byPkg[s.pkg.ImportPath] = append(byPkg[s.pkg.ImportPath], s)
		key := s.pkg.ImportPath + " " + s.name
		results[key] = &result{pkg: s.pkg.ImportPath, name: s.name}
		order = append(order, key)
	}
	var pkgErrs []string
	for _, p := range pkgs {
		fmt.Printf("stress: %s: %d tests × %d under -race (hog: %v) ...\n", p, len(byPkg[p]), count, hog)
		t0 := time.Now()
		if err := runPkg(p, byPkg[p], count, timeout, results); err != nil {
			pkgErrs = append(pkgErrs, fmt.Sprintf("%s: %v", p, err))
		}
		fmt.Printf("stress: %s done in %v\n", p, time.Since(t0).Round(time.Second))
	}
	return report(order, results, pkgErrs, count, time.Since(start))
}

// startHog keeps one core busy until stop is called.
func startHog() (stop func()) {
	var done atomic.Bool
	go func() {
		runtime.LockOSThread()
		for !done.Load() {
		}
	}()
	return func() { done.Store(true) }
}

// result is one test's tally.
type result struct {
	pkg, name              string
	pass, fail, skip, runs int
	// failures holds the output of failed runs (the first few).
	failures []string
	running  bool
	cur      strings.Builder
}

// event is one line of go test -json.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// runPkg runs the selected tests of one package count times and tallies
// them into results. A package that does not build, or whose test binary
// dies (a panic, the timeout), is an error; the test running then counts
// a failure.
func runPkg(path string, sel []selected, count int, timeout time.Duration, results map[string]*result) error {
	names := make([]string, len(sel))
	for i, s := range sel {
		names[i] = regexp.QuoteMeta(s.name)
	}
	args := []string{"test", "-race", "-json", "-count", fmt.Sprint(count), "-timeout", timeout.String(),
		"-run", "^(" + strings.Join(names, "|") + ")$", path}
	cmd := exec.Command("go", args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	var other strings.Builder // output outside any test (build errors, a panic's tail)
	tally(out, path, results, &other)
	werr := cmd.Wait()
	for _, r := range results {
		if r.pkg == path && r.running {
			r.fail++
			r.runs++
			r.keep("(the test binary ended during this run)\n" + r.cur.String() + other.String())
			r.running = false
		}
	}
	if werr != nil {
		var any bool
		for _, r := range results {
			any = any || (r.pkg == path && r.fail > 0)
		}
		if !any {
			return fmt.Errorf("go test failed: %v\n%s", werr, tail(other.String(), 60))
		}
	}
	return nil
}

func tally(out io.Reader, path string, results map[string]*result, other *strings.Builder) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		top, _, sub := strings.Cut(ev.Test, "/")
		r := results[path+" "+top]
		if ev.Test == "" || r == nil {
			if ev.Action == "output" || ev.Action == "build-output" {
				other.WriteString(ev.Output)
			}
			continue
		}
		switch {
		case ev.Action == "output":
			r.cur.WriteString(ev.Output)
		case sub:
			// a subtest's result is its parent's
		case ev.Action == "run":
			r.running = true
			r.cur.Reset()
		case ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip":
			r.running = false
			r.runs++
			switch ev.Action {
			case "pass":
				r.pass++
			case "skip":
				r.skip++
			default:
				r.fail++
				r.keep(r.cur.String())
				fmt.Printf("stress: FAIL %s (run %d)\n", r.name, r.runs)
			}
		}
	}
}

func (r *result) keep(out string) {
	if len(r.failures) < 3 {
		r.failures = append(r.failures, tail(out, 80))
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// report prints the failed runs' output, then the table; it returns an
// error if any run failed, a test ran fewer times than count, or a package
// could not run.
func report(order []string, results map[string]*result, pkgErrs []string, count int, took time.Duration) error {
	failed := 0
	for _, k := range order {
		r := results[k]
		for i, f := range r.failures {
			fmt.Printf("\n=== %s %s: failed run %d of %d shown ===\n%s\n", r.pkg, r.name, i+1, r.fail, f)
		}
	}
	fmt.Println()
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "package\ttest\truns\tpassed\tskipped\tfailed\t")
	for _, k := range order {
		r := results[k]
		mark := ""
		if r.fail > 0 || r.runs != count {
			failed++
			mark = "  <-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", strings.TrimPrefix(r.pkg, "github.com/gordon-deploy/docker-gordon/"),
			r.name, r.runs, r.pass, r.skip, r.fail, mark)
	}
	_ = tw.Flush()
	fmt.Printf("\n%d tests × %d runs under -race in %v\n", len(order), count, took.Round(time.Second))
	for _, e := range pkgErrs {
		fmt.Println("package error:", e)
	}
	if failed > 0 || len(pkgErrs) > 0 {
		return fmt.Errorf("%d of %d tests failed or did not run %d times", failed, len(order), count)
	}
	return nil
}
