// Package sdk is the plugin SDK of docker gordon (ARCHITECTURE §1, §4): the
// versioned protocol (proto/), the per-kind go-plugin glue (runtime/,
// probe/, traffic/), the host-side launcher and discovery (Host), and the
// Serve helpers plugin processes call. It compiles against the contract in
// package core only (errors, interfaces, spec and record types, the route
// graph types of core/routetable), never core/engine or the built-in
// implementations; contract_test.go holds it.
//
// Errors crossing the wire keep their core class in both directions
// (ErrNotFound↔NotFound, ErrConflict↔FailedPrecondition,
// ErrInvalid↔InvalidArgument, ErrUnavailable↔Unavailable,
// context.Canceled↔Canceled, context.DeadlineExceeded↔DeadlineExceeded);
// a transport failure of a dead plugin process wraps core.ErrPluginExited
// and names the plugin. The mapping lives in internal/wire/errs.go.
package sdk

import (
	"fmt"
	"os"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/probe"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/runtime"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/traffic"
)

// ProtocolVersion is the plugin protocol version this build speaks.
const ProtocolVersion = wire.ProtocolVersion

// Plugin kinds.
const (
	KindRuntime = wire.KindRuntime
	KindProbe   = wire.KindProbe
	KindTraffic = wire.KindTraffic
)

// EnvPlugin selects plugin mode of the docker-gordon binary: when set to
// "<kind>/<name>" (e.g. "runtime/docker"), main serves that built-in
// instead of running the CLI.
const EnvPlugin = "GORDON_PLUGIN"

// Handshake is the go-plugin handshake of every gordon plugin (protocol
// version 1, magic cookie GORDON_PLUGIN_COOKIE).
var Handshake = wire.Handshake

// Info identifies a running plugin: kind, name, protocol version, the
// plugin's own version and its PID (the Describe RPC of every service).
type Info = wire.Info

// RemoteError is an error returned by a plugin; it unwraps to its core class.
type RemoteError = wire.RemoteError

// Kinds lists the plugin kinds.
func Kinds() []string { return []string{KindRuntime, KindProbe, KindTraffic} }

// ValidKind reports whether kind is runtime, probe or traffic.
func ValidKind(kind string) bool {
	return kind == KindRuntime || kind == KindProbe || kind == KindTraffic
}

// ParseID splits "<kind>/<name>"; a bad kind or an empty name wraps
// core.ErrInvalid.
func ParseID(id string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(id, "/")
	if !ok || !ValidKind(kind) || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("%w: plugin id %q: want <runtime|probe|traffic>/<name>", core.ErrInvalid, id)
	}
	return kind, name, nil
}

// RequestedPlugin returns the "<kind>/<name>" in $GORDON_PLUGIN and whether
// it is set (plugin mode).
func RequestedPlugin() (string, bool) {
	v, ok := os.LookupEnv(EnvPlugin)
	return v, ok && v != ""
}

// ServeRuntime serves impl as a runtime plugin (plugin side; blocks until
// the host ends the process). info.Name and info.Version are reported by
// Describe; Kind, ProtocolVersion and PID are filled in.
func ServeRuntime(impl core.Runtime, info Info) { runtime.ServeInfo(impl, info) }

// ServeProbe serves impl as a probe plugin (see ServeRuntime).
func ServeProbe(impl core.Prober, info Info) { probe.ServeInfo(impl, info) }

// ServeTraffic serves impl as a traffic plugin (see ServeRuntime).
func ServeTraffic(impl core.Traffic, info Info) { traffic.ServeInfo(impl, info) }
