// Command gordon-probe-exec is an example custom readiness plugin: each
// attempt runs a command INSIDE the candidate container (docker exec) and
// is ready when it exits 0. Install it as gordon-probe-exec on the plugin
// path and declare
//
//	[services.api.readiness]
//	type = "plugin"
//	plugin = "exec"
//	[services.api.readiness.config]
//	command = ["/bin/check", "--ready"]   # required, argv (no shell)
//
// The plugin talks to the Docker engine itself, through the API client of
// github.com/moby/moby/client configured from the environment (DOCKER_HOST,
// DOCKER_API_VERSION, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY), which
// docker-gordon passes to every plugin: the probe contract carries only the
// container ID, so a plugin that needs the engine opens its own connection.
// See docs/plugins.md.
package main

import "github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"

func main() { probe.Serve(New()) }
