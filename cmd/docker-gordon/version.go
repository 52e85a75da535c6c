package main

import (
	"fmt"
	"runtime"
	"time"

	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
)

type versionOptions struct{ format string }

// versionInfo is `docker gordon version --format json`.
type versionInfo struct {
	Version        string `json:"version"`
	PluginProtocol int    `json:"plugin_protocol"`
	GoVersion      string `json:"go_version"`
	Platform       string `json:"platform"`
	Engine         struct {
		Version    string `json:"version,omitempty"`
		APIVersion string `json:"api_version,omitempty"`
		// ClientAPIVersion is the API version negotiated with the engine.
		ClientAPIVersion string `json:"client_api_version,omitempty"`
		Error            string `json:"error,omitempty"`
	} `json:"engine"`
}

func newVersionCommand(env *cliEnv) *cobra.Command {
	var o versionOptions
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Show the plugin, plugin protocol and Docker engine versions",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runVersion(cmd, env, o)
		},
	}
	addFormatFlag(cmd, &o.format)
	return cmd
}

func runVersion(cmd *cobra.Command, env *cliEnv, o versionOptions) error {
	var v versionInfo
	v.Version = version
	v.PluginProtocol = sdk.ProtocolVersion
	v.GoVersion = runtime.Version()
	v.Platform = runtime.GOOS + "/" + runtime.GOARCH

	ctx, cancel := withTimeout(cmd.Context(), 10*time.Second)
	defer cancel()
	sv, err := env.dockerCli.Client().ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		v.Engine.Error = err.Error()
	} else {
		v.Engine.Version = sv.Version
		v.Engine.APIVersion = sv.APIVersion
		v.Engine.ClientAPIVersion = env.dockerCli.Client().ClientVersion()
	}
	if isJSON(o.format) {
		return writeJSON(env.dockerCli.Out(), v)
	}
	w := env.dockerCli.Out()
	fmt.Fprintf(w, "docker gordon:    %s\n", v.Version)
	fmt.Fprintf(w, "plugin protocol:  %d\n", v.PluginProtocol)
	fmt.Fprintf(w, "go:               %s %s\n", v.GoVersion, v.Platform)
	if v.Engine.Error != "" {
		fmt.Fprintf(w, "engine:           unreachable: %s\n", v.Engine.Error)
		return fmt.Errorf("docker engine unreachable: %s (is the Docker engine running? try `docker info`)", v.Engine.Error)
	}
	fmt.Fprintf(w, "engine:           %s (API %s, negotiated %s)\n", v.Engine.Version, v.Engine.APIVersion, v.Engine.ClientAPIVersion)
	return nil
}
