package manifest

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// The manifest's regular expressions are compiled on first use, not at
// package init: every one of them compiles (an invalid one would panic
// only when a manifest first needs it).
func TestLazyRE_EveryExpressionCompiles(t *testing.T) {
	require.GreaterOrEqual(t, len(lazyREs), 17)
	for _, l := range lazyREs {
		_, err := regexp.Compile(l.expr)
		require.NoError(t, err, l.expr)
		require.Same(t, l.get(), l.get(), "compiled once")
	}
}
