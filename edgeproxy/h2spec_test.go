package edgeproxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// R62 (HTTP/2 conformance): h2spec, the module's pinned tool (go.mod's
// tool directive), passes every case, strict ones included, against the
// edge over TLS with a backend behind it.
func TestR62_H2SpecStrictPassesEveryCase(t *testing.T) {
	if testing.Short() {
		t.Skip("h2spec is a separate tool the first run builds")
	}
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "served by the h2spec backend\n")
	}))
	t.Cleanup(b.Close)
	e := h2EdgeTo(t, "localhost", addrOf(b))
	_, port, err := net.SplitHostPort(e.srv.HTTPSAddr())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "tool", "h2spec", "-t", "-k", "-S", "-h", "localhost", "-p", port, "-o", "2")
	out, err := cmd.CombinedOutput()
	summary := regexp.MustCompile(`\d+ tests, \d+ passed, \d+ skipped, \d+ failed`).Find(out)
	t.Logf("h2spec: %s", summary)
	require.NoError(t, err, "h2spec failed:\n%s", out)
	require.Regexp(t, ` 0 failed`, string(summary), "%s", out)
}
