package system

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// R74 (access log): edge start passes no access log flag for the default
// (stdout: an edge started before keeps its flags), passes off and a file
// under the state directory, and refuses a file outside it (the edge
// container sees only the state directory).
func TestEdgeStart_AccessLogFlags(t *testing.T) {
	state := t.TempDir()
	unit := func(dest string) (docker.Unit, error) {
		u := docker.Unit{Cmd: []string{"run"}}
		f := AccessLogOptions{Dest: dest, MaxSize: 100 << 20, Keep: 5}
		return u, withEdgeAccessLog(&u, &f, state)
	}
	u, err := unit("stdout")
	require.NoError(t, err)
	assert.Equal(t, []string{"run"}, u.Cmd)
	u, err = unit("off")
	require.NoError(t, err)
	assert.Equal(t, []string{"run", "--access-log", "off"}, u.Cmd)
	file := filepath.Join(state, "logs", "access.log")
	u, err = unit(file)
	require.NoError(t, err)
	assert.Equal(t, []string{"run", "--access-log", file}, u.Cmd)
	assert.DirExists(t, filepath.Dir(file))
	for _, bad := range []string{"/var/log/access.log", "relative.log", state + "/../x.log"} {
		_, err = unit(bad)
		require.ErrorIs(t, err, core.ErrInvalid, bad)
		assert.Contains(t, err.Error(), "under the state directory", bad)
	}
}

// The system plane repeats the edge's access log rotation defaults so as
// not to link edgeproxy (start-up cost); they must stay what gordon-edge
// takes, or edge start would pass flags the edge reads differently.
func TestEdgeAccess_RotationDefaultsAreTheEdges(t *testing.T) {
	assert.EqualValues(t, edgeproxy.DefaultAccessLogMaxSize, DefaultAccessLogMaxSize)
	assert.EqualValues(t, edgeproxy.DefaultAccessLogKeep, DefaultAccessLogKeep)
	assert.Equal(t, edgeproxy.StatusFile, edgestate.StatusFile)
}
