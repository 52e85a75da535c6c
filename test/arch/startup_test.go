package arch

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// startupHeavy are modules (a trailing "/") and project packages (with
// their subpackages) whose package init costs every process that
// links them milliseconds: compose-go's JSON Schema
// library compiles every draft's metaschema, Prometheus' client registers
// its collectors.
var startupHeavy = []string{
	"github.com/compose-spec/compose-go/",
	"github.com/santhosh-tekuri/jsonschema/",
	"github.com/prometheus/",
	module + "/core/compose",
	module + "/edgeproxy",
}

// TestStartup_InstalledCLILinksNoHeavyInit: docker-gordon as make build
// builds it (-tags gordoncomposehelper: the compose loader runs in
// gordon-compose) and gordon-backends, both started for every verb, link
// neither the compose loader nor the edge proxy nor Prometheus. A plain
// build of docker-gordon links the loader, still not the edge.
func TestStartup_InstalledCLILinksNoHeavyInit(t *testing.T) {
	under := func(d, p string) bool {
		return strings.HasSuffix(p, "/") && strings.HasPrefix(d, p) || d == p || strings.HasPrefix(d, p+"/")
	}
	// The edge's state files and certificate store are read by the CLI,
	// and its certificate storage server (certshare) runs in the CLI's
	// reconcile loop on a swarm manager, as are the control credentials
	// (control); they link no more than the
	// standard library and the core.
	light := []string{module + "/edgeproxy/edgestate", module + "/edgeproxy/certstore", module + "/edgeproxy/certshare", module + "/edgeproxy/control"}
	check := func(name string, deps []string, allowed ...string) {
		t.Helper()
		n := 0
		for _, d := range deps {
			for _, h := range startupHeavy {
				if !under(d, h) {
					continue
				}
				ok := false
				for _, a := range append(allowed, light...) {
					ok = ok || under(d, a)
				}
				assert.True(t, ok, "%s links %s", name, d)
				n++
			}
		}
		t.Logf("%s: %d packages linked, %d of them heavy but allowed", name, len(deps), n)
	}
	cli := module + "/cmd/docker-gordon"
	installed := goListDepPaths(t, "-tags", "gordoncomposehelper", cli)
	check("docker-gordon (-tags gordoncomposehelper)", installed[cli])
	backends := module + "/cmd/gordon-backends"
	check("gordon-backends", goListDepPaths(t, backends)[backends])
	check("docker-gordon (plain build)", goListDepPaths(t, cli)[cli],
		"github.com/compose-spec/compose-go/", "github.com/santhosh-tekuri/jsonschema/", module+"/core/compose")
}
