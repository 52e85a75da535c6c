package compose

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzLocate: the sniffer and the key index never panic on any input, and
// every key the index records has a positive line.
func FuzzLocate(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/corpus/*/compose.yaml")
	for _, s := range seeds {
		if b, err := os.ReadFile(s); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("name = \"blog\"\n[services.web]\nimage = \"x\"\n"))
	f.Add([]byte("a: &x {b: 1}\nc:\n  <<: [*x, *x]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = IsCompose(data)
		idx := indexFile("f.yaml", data)
		for k, at := range idx.pos {
			if at.Line <= 0 {
				t.Fatalf("key %q at line %d", k, at.Line)
			}
		}
		ps := &positions{files: []*fileIndex{idx}}
		_ = ps.locate("services.web.ports[0]")
		_ = ps.locateItem("services.web.labels", "traefik.")
	})
}
