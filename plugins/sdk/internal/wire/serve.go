package wire

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
)

// Serve serves one plugin of info.Kind over go-plugin's gRPC transport and
// returns only when the host ends the process. The plugin's own log goes to
// stderr as JSON lines, which the host re-logs through its hclog.Logger;
// stdout carries nothing but the handshake line.
func Serve(info Info, p plugin.Plugin) {
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: map[int]plugin.PluginSet{ProtocolVersion: {info.Kind: p}},
		GRPCServer:       plugin.DefaultGRPCServer,
		Logger: hclog.New(&hclog.LoggerOptions{
			Name:       info.ID(),
			Output:     os.Stderr,
			JSONFormat: true,
			Level:      hclog.Trace,
		}),
	})
}

// FillInfo completes info for kind: Kind and ProtocolVersion are forced;
// an empty Name is taken from the executable name gordon-<kind>-<name>
// (else the executable's base name).
func FillInfo(kind string, info Info) Info {
	info.Kind = kind
	info.ProtocolVersion = ProtocolVersion
	if info.Name == "" {
		base := filepath.Base(os.Args[0])
		info.Name = strings.TrimPrefix(base, "gordon-"+kind+"-")
	}
	return info
}

// WithPID returns info with PID set to this process.
func WithPID(info Info) Info {
	info.PID = os.Getpid()
	return info
}
