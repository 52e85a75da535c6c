package jobs

import (
	"strings"
)

// outputTail keeps the last OutputMax bytes of a run's output
// lines (each with its newline); truncated says earlier bytes were
// dropped.
type outputTail struct {
	b         []byte
	truncated bool
}

// add appends one line.
func (t *outputTail) add(line string) {
	t.b = append(t.b, line...)
	t.b = append(t.b, '\n')
	if over := len(t.b) - OutputMax; over > 0 {
		// Cut at a line start when one is near, so the kept output does
		// not begin mid-line.
		cut := over
		if i := strings.IndexByte(string(t.b[over:min(len(t.b), over+512)]), '\n'); i >= 0 {
			cut = over + i + 1
		}
		t.b = append(t.b[:0], t.b[cut:]...)
		t.truncated = true
	}
}

// lines is the kept output, one line each, after a line saying when
// earlier output was dropped.
func (t *outputTail) lines() []string {
	if len(t.b) == 0 {
		return nil
	}
	out := strings.Split(strings.TrimSuffix(string(t.b), "\n"), "\n")
	if t.truncated {
		out = append([]string{"(earlier output dropped: the journal keeps the last 64 KiB)"}, out...)
	}
	return out
}
