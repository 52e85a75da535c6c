package main

import (
	"github.com/docker/cli/cli-plugins/metadata"
	"github.com/docker/cli/cli-plugins/plugin"
	"github.com/docker/cli/cli/command"
	"github.com/spf13/cobra"
)

func main() {
	plugin.Run(func(dockerCli command.Cli) *cobra.Command {
		c := &cobra.Command{Use: "gordon"}
		_ = dockerCli.Client()
		return c
	}, metadata.Metadata{SchemaVersion: "0.1.0", Vendor: "gordon", Version: "dev"})
}
