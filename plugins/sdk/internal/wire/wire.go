// Package wire holds what every per-kind package of plugins/sdk shares: the
// go-plugin handshake, the plugin identity, the error-class mapping and the
// Serve helper. It is internal so that plugins/sdk (the host) can import the
// per-kind packages while they import this leaf without a cycle; package sdk
// re-exports the parts plugin hosts need.
package wire

import (
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// ProtocolVersion is the plugin protocol version this build speaks
// (ARCHITECTURE §1). Bump it on any incompatible change of the .proto files
// and keep serving the old version in VersionedPlugins while it is supported.
const ProtocolVersion = 1

// Plugin kinds.
const (
	KindRuntime = "runtime"
	KindProbe   = "probe"
	KindTraffic = "traffic"
)

// Handshake is the go-plugin handshake of every gordon plugin. The magic
// cookie only guards against running a plugin binary by hand; it is not a
// security feature.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   "GORDON_PLUGIN_COOKIE",
	MagicCookieValue: "c8d2b7a4-gordon-plugin-v1-9f1e3a6b",
}

// Info identifies a running plugin (the Describe RPC of every service).
type Info struct {
	// Kind is runtime, probe or traffic.
	Kind string `json:"kind"`
	// Name is the plugin name ("docker", "http", "edge", or a custom name).
	Name string `json:"name"`
	// ProtocolVersion is the protocol version the plugin serves.
	ProtocolVersion int `json:"protocol_version"`
	// Version is the plugin's own version string (optional).
	Version string `json:"version,omitempty"`
	// PID is the plugin's process ID (the host's own PID in-process).
	PID int `json:"pid"`
}

// ID returns "<kind>/<name>".
func (i Info) ID() string { return i.Kind + "/" + i.Name }

// InfoToProto converts i.
func InfoToProto(i Info) *pb.PluginInfo {
	return &pb.PluginInfo{Kind: i.Kind, Name: i.Name, ProtocolVersion: int32(i.ProtocolVersion), Version: i.Version, Pid: int64(i.PID)}
}

// InfoFromProto converts p (nil → zero Info).
func InfoFromProto(p *pb.PluginInfo) Info {
	if p == nil {
		return Info{}
	}
	return Info{Kind: p.Kind, Name: p.Name, ProtocolVersion: int(p.ProtocolVersion), Version: p.Version, PID: int(p.Pid)}
}

// TimeToProto converts t; the zero time becomes nil (unset).
func TimeToProto(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

// TimeFromProto converts ts; nil becomes the zero time.
func TimeFromProto(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

// DurationToProto converts d; zero becomes nil.
func DurationToProto(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// DurationFromProto converts d; nil becomes zero.
func DurationFromProto(d *durationpb.Duration) time.Duration {
	if d == nil {
		return 0
	}
	return d.AsDuration()
}
