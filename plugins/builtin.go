// Package plugins lists the plugins compiled into docker-gordon (STYLE
// "What we take" 5): one explicit table of typed factories, served when the
// binary is re-executed in plugin mode (GORDON_PLUGIN=<kind>/<name>,
// ARCHITECTURE §1). The implementations live in plugins/runtime/docker,
// plugins/runtime/swarm, plugins/probe/{http,tcp,log} and
// plugins/traffic/edge; the SDK in plugins/sdk never imports them.
//
// runtime/swarm is served like any built-in, with the options
// swarm.OptionsFromEnv reads (GORDON_SWARM_EDGE_NETWORK, GORDON_STATE_DIR);
// the CLI decides when a state directory uses it (docs/swarm.md).
package plugins

import (
	"fmt"
	"os"
	rtdebug "runtime/debug"
	"sort"

	"github.com/gordon-deploy/docker-gordon/core"
	httpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/http"
	logprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/log"
	tcpprobe "github.com/gordon-deploy/docker-gordon/plugins/probe/tcp"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/docker"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/swarm"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk"
	"github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
	"github.com/gordon-deploy/docker-gordon/system"
)

// EnvStateDir names the state directory the traffic/edge plugin writes
// edge/routes.json under (the host passes it in HostConfig.Env).
const EnvStateDir = "GORDON_STATE_DIR"

// builtin is one compiled-in plugin; exactly one factory matches kind.
type builtin struct {
	kind, name string
	runtime    func() (core.Runtime, error)
	probe      func() (core.Prober, error)
	traffic    func() (core.Traffic, error)
}

func (b builtin) id() string { return b.kind + "/" + b.name }

// builtins is the table. Factories run in the plugin process only.
var builtins = []builtin{
	{kind: sdk.KindRuntime, name: "docker", runtime: func() (core.Runtime, error) {
		rt, err := docker.NewFromEnv()
		if err != nil {
			return nil, err
		}
		return rt, nil
	}},
	{kind: sdk.KindRuntime, name: swarm.Name, runtime: func() (core.Runtime, error) {
		rt, err := swarm.NewFromEnv()
		if err != nil {
			return nil, err
		}
		return rt, nil
	}},
	{kind: sdk.KindProbe, name: "http", probe: func() (core.Prober, error) { return httpprobe.New(), nil }},
	{kind: sdk.KindProbe, name: "tcp", probe: func() (core.Prober, error) { return tcpprobe.New(), nil }},
	{kind: sdk.KindProbe, name: "log", probe: func() (core.Prober, error) {
		// The log probe reads container logs through its own runtime client
		// inside this plugin process: the swarm's (service logs) when the
		// state directory serves a swarm (system/swarm), else the engine's.
		if system.Resolve(os.Getenv(EnvStateDir)).OnSwarm() {
			rt, err := swarm.NewFromEnv()
			if err != nil {
				return nil, err
			}
			return logprobe.New(rt), nil
		}
		rt, err := docker.NewFromEnv()
		if err != nil {
			return nil, err
		}
		return logprobe.New(rt), nil
	}},
	{kind: sdk.KindTraffic, name: "edge", traffic: func() (core.Traffic, error) {
		dir := os.Getenv(EnvStateDir)
		if dir == "" {
			return nil, fmt.Errorf("traffic/edge: %w: %s is not set", core.ErrInvalid, EnvStateDir)
		}
		return edge.New(dir), nil
	}},
}

// Names returns the ids ("<kind>/<name>") of the built-in plugins, sorted;
// equal to sdk.DefaultBuiltins.
func Names() []string {
	out := make([]string, 0, len(builtins))
	for _, b := range builtins {
		out = append(out, b.id())
	}
	sort.Strings(out)
	return out
}

// ServeBuiltinIfRequested serves the built-in named by $GORDON_PLUGIN and
// returns true once the host ends the plugin; it returns false at once when
// the variable is unset (normal CLI mode). main calls it before cobra. An
// unknown id or a failing factory is written to stderr (the host relays it)
// and the process exits with status 1 before the handshake.
func ServeBuiltinIfRequested() bool {
	id, ok := sdk.RequestedPlugin()
	if !ok {
		return false
	}
	if err := serveBuiltin(id); err != nil {
		fmt.Fprintf(os.Stderr, "docker-gordon plugin mode: %v\n", err)
		os.Exit(1)
	}
	return true
}

// serveBuiltin serves id until the host ends it; errors wrap
// core.ErrNotFound (unknown id) or the factory's error.
func serveBuiltin(id string) error {
	b, ok := lookup(id)
	if !ok {
		return fmt.Errorf("built-in plugin %q: %w (built-ins: %v)", id, core.ErrNotFound, Names())
	}
	info := sdk.Info{Name: b.name, Version: version()}
	switch {
	case b.runtime != nil:
		impl, err := b.runtime()
		if err != nil {
			return fmt.Errorf("built-in plugin %s: %w", id, err)
		}
		sdk.ServeRuntime(impl, info)
	case b.probe != nil:
		impl, err := b.probe()
		if err != nil {
			return fmt.Errorf("built-in plugin %s: %w", id, err)
		}
		sdk.ServeProbe(impl, info)
	case b.traffic != nil:
		impl, err := b.traffic()
		if err != nil {
			return fmt.Errorf("built-in plugin %s: %w", id, err)
		}
		sdk.ServeTraffic(impl, info)
	}
	return nil
}

func lookup(id string) (builtin, bool) {
	for _, b := range builtins {
		if b.id() == id {
			return b, true
		}
	}
	return builtin{}, false
}

// version is the main module's version from the build info ("" if none).
func version() string {
	if bi, ok := rtdebug.ReadBuildInfo(); ok && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return ""
}
