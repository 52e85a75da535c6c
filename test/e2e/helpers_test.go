package e2e

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}
