package docker

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
)

// An exec's output lines are bounded and valid text, however the command
// writes them: one 20 MB write without a newline comes out in pieces of
// at most maxExecLine bytes, and invalid UTF-8 (a Latin-1 message) is
// replaced, so it can cross the plugin protocol as a string.
func TestExecLines_BoundedValidText(t *testing.T) {
	var got []string
	w := &execLines{fn: func(l string) { got = append(got, l) }}
	big := bytes.Repeat([]byte("e"), 20<<20)
	_, _ = w.Write(big)
	_, _ = w.Write([]byte("progr\xe8s: 50%\r\nlast"))
	w.flush()
	total := 0
	for _, l := range got[:len(got)-2] {
		assert.LessOrEqual(t, len(l), maxExecLine)
		total += len(l)
	}
	assert.Equal(t, len(big), total, "nothing of the long line is lost")
	assert.Equal(t, "progr\uFFFDs: 50%", got[len(got)-2])
	assert.Equal(t, "last", got[len(got)-1])
	for _, l := range got {
		assert.True(t, utf8.ValidString(l))
		assert.False(t, strings.Contains(l, "\n"))
	}
}
