package manifest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Problem is one thing wrong with a manifest.
type Problem struct {
	// Line and Column locate the key in the source, both 1-based; 0 when the
	// key could not be located (for example a required key missing at the
	// top level).
	Line   int `json:"line"`
	Column int `json:"column"`
	// Key is the dotted key path with array indices, e.g.
	// "services.web.http[0].port"; empty for a problem of the whole document
	// (a TOML syntax error before any key).
	Key string `json:"key,omitempty"`
	// Message says what is wrong and what would be valid.
	Message string `json:"message"`
}

// String formats the problem as "line:col: key: message" (without the file).
func (p Problem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", p.Line, p.Column)
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ManifestError reports every problem found in one manifest at once. It wraps
// core.ErrInvalid: errors.Is(err, core.ErrInvalid) holds. Nothing was
// deployed or stored when it is returned.
type ManifestError struct {
	// File is the name given to Parse (the path for Load).
	File string `json:"file"`
	// Problems, ordered by position (problems without one last); never empty.
	Problems []Problem `json:"problems"`
}

// Error prints every problem on its own line as "file:line:col: key: message"
// ("file: key: message" when the position is unknown).
func (e *ManifestError) Error() string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.File)
		if p.Line > 0 {
			b.WriteByte(':')
		} else {
			b.WriteString(": ")
		}
		b.WriteString(p.String())
	}
	if len(e.Problems) == 0 {
		fmt.Fprintf(&b, "%s: %s", e.File, core.ErrInvalid)
	}
	return b.String()
}

// Unwrap returns core.ErrInvalid.
func (e *ManifestError) Unwrap() error { return core.ErrInvalid }

// sortProblems orders problems by line and column, problems without a
// position last; ties keep their discovery order.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}
