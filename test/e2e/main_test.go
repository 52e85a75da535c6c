// Package e2e drives the real binaries (docker gordon through the docker
// CLI, gordon-edge) against a real Docker engine, with images built locally
// FROM scratch (ARCHITECTURE §9). The shared setup (binaries built once,
// CLI runners, the per-test edge and cleanup) is package fixture.
package e2e

import (
	"os"
	"testing"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
)

func TestMain(m *testing.M) {
	os.Exit(fixture.Main(m))
}
