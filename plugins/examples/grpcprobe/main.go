// Command gordon-probe-grpc is an example custom readiness plugin: one
// grpc.health.v1.Health/Check per attempt against the candidate's loopback
// bind. Install it as an executable named gordon-probe-grpc on the plugin
// path (--plugin-dir, GORDON_PLUGIN_PATH or <state>/plugins) and declare
//
//	[services.api.readiness]
//	type = "plugin"
//	plugin = "grpc"
//	port = 8080                 # the gRPC port (any declared HTTP/TCP port)
//	[services.api.readiness.config]
//	service = ""                # optional: the health service name
//
// See docs/plugins.md.
package main

import "github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"

func main() { probe.Serve(New()) }
