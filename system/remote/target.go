// Package remote runs a verb on a remote engine's machine: an engine reached
// through a unix socket on this machine is local and every verb runs here.
// Any other endpoint (ssh://, tcp://, a context naming one) is remote: the
// verb runs on the engine's machine, in a short-lived runner container built
// there FROM scratch from this very binary (RunnerImage), with the engine's
// socket and the server's state directory bind-mounted at their own paths,
// so the journal, the locks, the secrets and the edge's route table stay
// next to the engine. The CLI sends what the verb needs over the container's
// stdin (Bundle), streams its stdout and stderr, and exits with its exit
// status. Closing that stdin (Ctrl-C here, or a lost connection) interrupts
// the remote verb as SIGTERM interrupts a local one (StartSession).
//
// The package returns results and writes progress to the writers it is
// given; the CLI keeps the verbs, the flags and the rendering.
package remote

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// Engine labels (dockerd --label) that move a server's gordon paths: the
// state directory and the engine's unix socket as seen on that machine.
const (
	EngineLabelStateDir = "dev.gordon.state-dir"
	EngineLabelSocket   = "dev.gordon.docker-socket"

	DefaultServerStateDir = "/var/lib/docker-gordon"
	DefaultServerSocket   = "/var/run/docker.sock"

	// RoleRunner is the dev.gordon.role label of runner images and
	// containers.
	RoleRunner = "runner"

	// RemoteStateDirEnv, set on the client, overrides the server's state
	// directory (an engine one cannot relabel, tests).
	RemoteStateDirEnv = "GORDON_REMOTE_STATE_DIR"
)

// Target is the engine a verb acts on.
type Target struct {
	Context string // docker context name ("default" without one)
	Host    string // endpoint (unix:///var/run/docker.sock, tcp://…, ssh://…)
	Remote  bool   // not a unix socket on this machine
}

// String is "context NAME (HOST, local|remote)", the verb's first progress
// line and the engine errors name.
func (t Target) String() string {
	where := "local"
	if t.Remote {
		where = "remote"
	}
	return fmt.Sprintf("context %s (%s, %s)", t.Context, t.Host, where)
}

// NewTarget names the engine of a docker context and endpoint: "default"
// without a context, client.DefaultDockerHost without a host.
func NewTarget(contextName, host string) Target {
	t := Target{Context: contextName, Host: host}
	if t.Context == "" {
		t.Context = "default"
	}
	if t.Host == "" {
		t.Host = client.DefaultDockerHost
	}
	t.Remote = IsRemoteEndpoint(t.Host)
	return t
}

// IsRemoteEndpoint: a unix socket (or a Windows named pipe) is this
// machine's; every other scheme reaches another one.
func IsRemoteEndpoint(host string) bool {
	return !strings.HasPrefix(host, "unix://") && !strings.HasPrefix(host, "npipe://")
}

// ServerPaths are the runner's bind mounts on the engine's machine.
type ServerPaths struct {
	StateDir string
	Socket   string
	Arch     string
	// Network is the runner's network: the edge overlay on a swarm
	// manager that has one, else "" (the host network).
	Network string
}

// ReadServerPaths takes the state directory and the socket from the
// engine's labels, else the defaults; GORDON_REMOTE_STATE_DIR on the client
// wins over both for the state directory. The error is the engine's,
// classified.
func ReadServerPaths(ctx context.Context, api client.APIClient) (ServerPaths, error) {
	p := ServerPaths{StateDir: DefaultServerStateDir, Socket: DefaultServerSocket}
	info, err := api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return p, fmt.Errorf("engine info: %w", dockererr.Classify(err))
	}
	for _, l := range info.Info.Labels {
		k, v, _ := strings.Cut(l, "=")
		switch k {
		case EngineLabelStateDir:
			p.StateDir = v
		case EngineLabelSocket:
			p.Socket = v
		}
	}
	if d := os.Getenv(RemoteStateDirEnv); d != "" {
		p.StateDir = d
	}
	p.Arch = info.Info.Architecture
	if info.Info.Swarm.ControlAvailable {
		if _, err := api.NetworkInspect(ctx, swarm.DefaultNetwork, client.NetworkInspectOptions{}); err == nil {
			p.Network = swarm.DefaultNetwork
		}
	}
	return p, nil
}

// shortID is an image or container ID's first 12 hex digits.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
