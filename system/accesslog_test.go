package system

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/edgeproxy"
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

// tailFile prints the last N lines of the access log file (all with
// "all"), counting only the lines of the app asked for: logs APP --access
// --tail 2 shows that app's last 2 requests even when other apps' came
// after them.
func TestLogsAccess_TailFileLastLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "access.log")
	require.NoError(t, os.WriteFile(p, []byte(lineBlog+lineShop+lineBlog+lineBlog+lineBlog), 0o600))
	every := func(w io.Writer) io.Writer { return &accessFilter{w: w} }
	shop := func(w io.Writer) io.Writer { return &accessFilter{w: w, app: "shop"} }
	var out bytes.Buffer
	require.NoError(t, tailFile(context.Background(), p, false, "2", &out, every))
	assert.Equal(t, lineBlog+lineBlog, out.String())
	out.Reset()
	require.NoError(t, tailFile(context.Background(), p, false, "2", &out, shop))
	assert.Equal(t, lineShop, out.String(), "the app's last requests, not the file's last lines")
	out.Reset()
	require.NoError(t, tailFile(context.Background(), p, false, "all", &out, every))
	assert.Equal(t, 5, strings.Count(out.String(), "\n"))
}

// The access log destinations are the edge's own words.
func TestAccessLog_ConstantsAreTheEdges(t *testing.T) {
	assert.Equal(t, edgeproxy.AccessLogOff, AccessLogOff)
	assert.Equal(t, edgeproxy.AccessLogStdout, AccessLogStdout)
}
