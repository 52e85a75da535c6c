package system

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

const (
	lineBlog = `{"time":"2026-12-02T08:00:00.000Z","host":"blog.test","method":"GET","path":"/","status":200,"duration_ms":1.000,"bytes_out":5,"app":"blog","service":"web","instance":"blog-web-1","client":"192.0.2.1","request_id":"a","protocol":"HTTP/1.1"}` + "\n"
	lineShop = `{"time":"2026-12-02T08:00:01.000Z","host":"shop.test","method":"POST","path":"/buy","status":502,"duration_ms":2.000,"bytes_out":0,"app":"shop","service":"api","instance":"shop-api-1","client":"192.0.2.2","request_id":"b","protocol":"HTTP/2"}` + "\n"
)

// R74 (access log): logs APP --access keeps the access log lines of APP
// (and of --service when given) and drops the others and anything that
// is not an access log line, whatever the chunking of the stream.
func TestLogsAccess_FilterKeepsOneAppsLines(t *testing.T) {
	stream := lineBlog + "not json\n" + lineShop + `{"@level":"info","@message":"route table applied"}` + "\n" + lineBlog
	for _, tc := range []struct{ app, service, want string }{
		{"", "", lineBlog + lineShop + lineBlog},
		{"blog", "", lineBlog + lineBlog},
		{"shop", "api", lineShop},
		{"shop", "web", ""},
	} {
		var out bytes.Buffer
		f := &accessFilter{w: &out, app: tc.app, service: tc.service}
		for i := 0; i < len(stream); i += 7 { // odd chunks split lines
			_, err := f.Write([]byte(stream[i:min(i+7, len(stream))]))
			require.NoError(t, err)
		}
		assert.Equal(t, tc.want, out.String(), "%+v", tc)
	}
}

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

// tailFile prints the last N lines of the access log file (all with
// "all").
func TestLogsAccess_TailFileLastLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "access.log")
	require.NoError(t, os.WriteFile(p, []byte(lineBlog+lineShop+lineBlog), 0o600))
	var out bytes.Buffer
	require.NoError(t, tailFile(context.Background(), p, false, "2", &out))
	assert.Equal(t, lineShop+lineBlog, out.String())
	out.Reset()
	require.NoError(t, tailFile(context.Background(), p, false, "all", &out))
	assert.Equal(t, 3, strings.Count(out.String(), "\n"))
}

// The system plane repeats the edge's access log names and rotation defaults so as
// not to link edgeproxy (start-up cost); they must stay what gordon-edge
// takes, or edge start would pass flags the edge reads differently.
func TestEdgeAccess_ConstantsAreTheEdges(t *testing.T) {
	assert.Equal(t, edgeproxy.AccessLogOff, AccessLogOff)
	assert.Equal(t, edgeproxy.AccessLogStdout, AccessLogStdout)
	assert.EqualValues(t, edgeproxy.DefaultAccessLogMaxSize, DefaultAccessLogMaxSize)
	assert.EqualValues(t, edgeproxy.DefaultAccessLogKeep, DefaultAccessLogKeep)
	assert.Equal(t, edgeproxy.StatusFile, edgestate.StatusFile)
}
