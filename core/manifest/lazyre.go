package manifest

import (
	"regexp"
	"sync"
)

// lazyRE is a regular expression compiled on first use. core/manifest is
// linked by every docker-gordon process, most of which never check a
// manifest; compiling its expressions at package init cost each process
// start about half a millisecond. Every lazyRE is listed
// in lazyREs, so that a test compiles them all.
type lazyRE struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

var lazyREs []*lazyRE

func newLazyRE(expr string) *lazyRE {
	l := &lazyRE{expr: expr}
	lazyREs = append(lazyREs, l)
	return l
}

func (l *lazyRE) get() *regexp.Regexp {
	l.once.Do(func() { l.re = regexp.MustCompile(l.expr) })
	return l.re
}

func (l *lazyRE) MatchString(s string) bool { return l.get().MatchString(s) }

func (l *lazyRE) FindStringSubmatch(s string) []string { return l.get().FindStringSubmatch(s) }

func (l *lazyRE) ReplaceAllString(src, repl string) string {
	return l.get().ReplaceAllString(src, repl)
}
