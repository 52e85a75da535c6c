package compose

import (
	"sort"

	"github.com/gordon-deploy/docker-gordon/core/composeapi"
)

// Problem and Error are composeapi's: the CLI reads them without linking
// the loader (see package composeapi).
type (
	Problem = composeapi.Problem
	Error   = composeapi.Error
)

// sortProblems orders by file (merge order), line, column; unlocated last.
func sortProblems(files []string, ps []Problem) {
	rank := map[string]int{}
	for i, f := range files {
		rank[f] = i
	}
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if (a.Line == 0) != (b.Line == 0) {
			return b.Line == 0
		}
		if a.File != b.File {
			return rank[a.File] < rank[b.File]
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}
