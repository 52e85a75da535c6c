// Command docker-gordon is the `docker gordon` Docker CLI plugin. The same
// binary also serves the built-in backend plugins: when GORDON_PLUGIN is set
// (by plugins/sdk's host when it re-executes this binary) it serves that
// plugin over go-plugin and never starts the CLI (ARCHITECTURE §1).
package main

import (
	"fmt"
	"os"

	"github.com/docker/cli/cli-plugins/metadata"
	"github.com/docker/cli/cli-plugins/plugin"
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/cmd/internal/probehelper"
	"github.com/gordon-deploy/docker-gordon/plugins"
	"github.com/gordon-deploy/docker-gordon/system/remote"
)

// version is stamped by the Makefile (-X main.version=…).
var version = "dev"

func main() {
	// The internal readiness helper of a probe-helper container (R30)
	// runs its probe and exits.
	if probehelper.RunIfRequested() {
		return
	}
	// Plugin mode next: nothing may be printed to stdout before
	// plugin.Serve writes its handshake line.
	if plugins.ServeBuiltinIfRequested() {
		return
	}
	// A runner container (system/remote) takes its bundle from stdin first.
	if os.Getenv(remote.RunnerEnv) == "1" {
		if _, err := remote.StartSession(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	plugin.Run(func(dockerCli command.Cli) *cobra.Command {
		return newRootCommand(dockerCli)
	}, pluginMetadata())
}

// pluginMetadata is what `docker` reads through docker-cli-plugin-metadata.
func pluginMetadata() metadata.Metadata {
	return metadata.Metadata{
		SchemaVersion:    "0.1.0",
		Vendor:           "docker gordon",
		Version:          version,
		ShortDescription: "Zero-downtime deploys of multi-service apps on one Docker engine",
		URL:              "https://github.com/gordon-deploy/docker-gordon",
	}
}
