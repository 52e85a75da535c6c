// Command gordon-backends serves docker gordon's built-in backend plugins
// (runtime/docker, runtime/swarm, traffic/edge, probe/http, probe/tcp,
// probe/log) and nothing else. docker-gordon starts it, with GORDON_PLUGIN
// set, instead of re-executing itself when it sits beside docker-gordon
// under the name that build of docker-gordon looks for: the Makefile
// stamps both with one build id and installs this binary as
// gordon-backends-<build id> (cmd/docker-gordon/backends.go). It links
// neither the CLI nor the compose loader, so a backend starts and
// completes its handshake in about a third of the time.
// Without it, docker-gordon serves the same plugins itself.
package main

import (
	"fmt"
	"os"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/probehelper"
	"github.com/gordon-deploy/docker-gordon/plugins"
)

// version is stamped by the Makefile (-X main.version=…), as docker-gordon's.
var version = "dev"

func main() {
	// runtime/docker builds its probe-helper image (R30) from the binary
	// serving it: this one, when docker-gordon runs its backends from it.
	if probehelper.RunIfRequested() {
		return
	}
	if plugins.ServeBuiltinIfRequested() {
		return
	}
	fmt.Fprintf(os.Stderr, "gordon-backends %s serves docker gordon's built-in backend plugins; docker gordon starts it (GORDON_PLUGIN=<kind>/<name>). Run `docker gordon` instead.\n", version)
	os.Exit(2)
}
