package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The automatic selection reads each Eventually's bound as a constant:
// literals, time units, constants (package level or in the test) and
// arithmetic; a bound it cannot evaluate does not select the test.
func TestShortestEventuallyBound(t *testing.T) {
	src := `package x
const wait = 2 * time.Second
func TestA(t *testing.T) { require.Eventually(t, f, 3*time.Second, time.Millisecond); assert.Eventually(t, f, wait, 1) }
func TestB(t *testing.T) { const b = 1500 * time.Millisecond; t.Run("s", func(t *testing.T) { require.Eventually(t, f, b+time.Second, 1) }) }
func TestC(t *testing.T) { a := assert.New(t); a.Eventually(f, 10*time.Second, 1) }
func TestD(t *testing.T) { require.Eventually(t, f, d(), 1) }
func TestE(t *testing.T) { require.EventuallyWithT(t, g, time.Duration(400)*time.Millisecond, 1) }
`
	f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", src, 0)
	require.NoError(t, err)
	consts := map[string]ast.Expr{}
	collectConsts(f, consts)
	want := map[string]time.Duration{"TestA": 2 * time.Second, "TestB": 2500 * time.Millisecond, "TestC": 10 * time.Second, "TestE": 400 * time.Millisecond}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		got, ok := shortestEventually(fd, consts)
		w, has := want[fd.Name.Name]
		assert.Equal(t, has, ok, fd.Name.Name)
		assert.Equal(t, w, got, fd.Name.Name)
	}
}

func TestTestNames(t *testing.T) {
	for n, want := range map[string]bool{"Test": true, "TestX": true, "Test_x": true, "TestMain": false, "Testx": false, "Example": false} {
		assert.Equal(t, want, isTestName(n), n)
	}
}

// A line of tests.txt that is neither a comment, auto/exclude, nor
// "<pattern> <regexp>" is refused with its line number.
func TestReadListRefusesAMalformedLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tests.txt")
	require.NoError(t, os.WriteFile(p, []byte("# c\nauto ./a/... ./b\n./x ^TestY\n./x\n"), 0o600))
	_, err := readList(p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tests.txt:4")
	require.NoError(t, os.WriteFile(p, []byte("# c\nauto ./a/... ./b\nexclude ./a/c\n./x ^TestY\n"), 0o600))
	l, err := readList(p)
	require.NoError(t, err)
	assert.Equal(t, []string{"./a/...", "./b"}, l.auto)
	assert.Equal(t, []string{"./a/c"}, l.exclude)
	require.Len(t, l.entries, 1)
	assert.Equal(t, "./x", l.entries[0].pattern)
}
