package docker

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// LastLines keeps the last N lines written in any chunks, a partial last
// line included.
func TestLastLinesKeepsTheLastN(t *testing.T) {
	var out bytes.Buffer
	l := &LastLines{N: 2, W: &out}
	for _, chunk := range []string{"a\nb", "\nc\n", "d"} {
		_, err := l.Write([]byte(chunk))
		require.NoError(t, err)
	}
	require.NoError(t, l.Flush())
	assert.Equal(t, "c\nd", out.String())
	out.Reset()
	l = &LastLines{N: 0, W: &out}
	_, _ = l.Write([]byte("x\n"))
	require.NoError(t, l.Flush())
	assert.Empty(t, out.String())
}
