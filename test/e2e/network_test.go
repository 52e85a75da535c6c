package e2e

import (
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// An app's private network still gets created once Docker's default
// address pools are used up (about 31 bridge networks on Docker 20.10):
// the runtime backend then gives it a free /24 of 172.16.0.0/16 that
// overlaps no other network or host route, and the app deploys and
// serves as usual (SPEC glossary "private network", R17.1).
func TestR17_AppNetworkWhenDefaultPoolsAreUsedUp(t *testing.T) {
	imgs := testimages.Require(t, "v1", "httpd")
	state := t.TempDir()
	app := "e2epool"
	fixture.CleanupApp(t, app)
	const filler = "dev.gordon.e2e-pool-filler"
	t.Cleanup(func() {
		out, _ := exec.Command("docker", "network", "ls", "-q", "--filter", "label="+filler).Output()
		for _, n := range strings.Fields(string(out)) {
			_ = exec.Command("docker", "network", "rm", n).Run()
		}
	})
	// Use up the default pools with empty networks.
	exhausted := false
	for i := range 64 {
		out, err := exec.Command("docker", "network", "create", "--label", filler, fmt.Sprintf("gordon-e2e-filler-%d", i)).CombinedOutput()
		if err != nil {
			require.Contains(t, string(out), "address pool", "unexpected network create failure")
			exhausted = true
			break
		}
	}
	require.True(t, exhausted, "64 networks did not use up the default pools (custom default-address-pools?)")

	edge := fixture.StartEdge(t, state)
	file := filepath.Join(t.TempDir(), "app.toml")
	fixture.WriteFile(t, file, fmt.Sprintf(`name = %q
[services.web]
image = %q
[[services.web.http]]
port = 8080
host = "pool.test"
`, app, imgs["httpd"]))
	r := fixture.Gordon(t, state, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	code, _, err := edge.Get("pool.test", "/")
	require.NoError(t, err)
	require.Equal(t, 200, code)

	out, err := exec.Command("docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", "gordon-"+app).Output()
	require.NoError(t, err)
	sub, err := netip.ParsePrefix(strings.TrimSpace(string(out)))
	require.NoError(t, err, "subnet %q", out)
	require.True(t, netip.MustParsePrefix("172.16.0.0/16").Contains(sub.Addr()), "subnet %s from gordon's pool", sub)
	require.Equal(t, 24, sub.Bits())
}
