package system

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// edge start names the gordon-edge it installs and warns when PATH holds
// another build; an identical copy on PATH is no warning.
func TestNoteEdgeBinaryWarnsWhenPATHHoldsAnotherBuild(t *testing.T) {
	installed := filepath.Join(t.TempDir(), "gordon-edge")
	require.NoError(t, os.WriteFile(installed, []byte("build A"), 0o755))
	onPath := t.TempDir()
	t.Setenv("PATH", onPath)
	u := docker.Unit{Binaries: map[string]string{"/gordon-edge": installed}}

	var out, errw bytes.Buffer
	NoteEdgeBinary(&out, &errw, u)
	assert.Equal(t, "gordon-edge: binary "+installed+"\n", out.String())
	assert.Empty(t, errw.String(), "nothing on PATH")

	require.NoError(t, os.WriteFile(filepath.Join(onPath, "gordon-edge"), []byte("build A"), 0o755))
	errw.Reset()
	NoteEdgeBinary(&out, &errw, u)
	assert.Empty(t, errw.String(), "the same build on PATH")

	require.NoError(t, os.WriteFile(filepath.Join(onPath, "gordon-edge"), []byte("build B"), 0o755))
	errw.Reset()
	NoteEdgeBinary(&out, &errw, u)
	assert.Contains(t, errw.String(), "warning: the gordon-edge on PATH ("+filepath.Join(onPath, "gordon-edge")+") is another build than the installed one ("+installed+")")
}
