// Package system is the system plane: everything that runs beside the
// apps. It installs, updates, stops and reports gordon-edge and
// gordon-reconcile on one engine (as containers, system/docker) or on a
// swarm (a global edge service on an overlay, system/swarm), adopts a
// lost manager's apps, and decides, once per state directory, which of
// the two serves it (Platform). It returns results and writes progress
// lines to Env.Out; the CLI (cmd/docker-gordon) owns flags and tables.
package system

import (
	"context"
	"io"

	"github.com/hashicorp/go-hclog"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Env is what the system plane works with, in place of the CLI's own
// environment: the Docker API client, the state directory, where progress
// and warnings go, and the few things only the caller knows.
type Env struct {
	// API is the engine the command acts on.
	API client.APIClient
	// StateDir is the absolute state directory.
	StateDir string
	// DockerHost is the engine endpoint the CLI uses (DOCKER_HOST form,
	// "" for the default socket): the reconcile container reaches the
	// engine through it.
	DockerHost string
	// Out gets progress and results, Err warnings.
	Out, Err io.Writer
	// Log gets diagnostics (nil: none).
	Log hclog.Logger
	// RegistryAuth is the X-Registry-Auth value for an image reference
	// ("" when no credentials are known).
	RegistryAuth func(ref string) string
	// Records opens the state directory's records (the journal).
	Records func() (Records, error)
	// EdgeBinary finds the gordon-edge binary to install.
	EdgeBinary func() (string, error)
	// Platform is the state directory's (Resolve).
	Platform Platform
}

// Records is the part of the journal the system plane reads: which apps
// the state directory holds and what serves of each.
type Records interface {
	ListApps(ctx context.Context) ([]string, error)
	LoadActive(ctx context.Context, app string) (core.Active, error)
}

func (e Env) registryAuth(ref string) string {
	if e.RegistryAuth == nil {
		return ""
	}
	return e.RegistryAuth(ref)
}
