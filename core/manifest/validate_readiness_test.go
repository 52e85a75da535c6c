package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestManifest_ValidationReadiness: readiness types and the keys each
// applies to, and the port a probe targets (SPEC R29, R30, R35).
func TestManifest_ValidationReadiness(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"readiness type", base + "[services.web.readiness]\ntype = \"grpc\"\n", "services.web.readiness.type", `unknown readiness type "grpc": want one of "none", "http", "tcp", "log", "plugin" or "docker"`},
		{"readiness http path origin-form", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\npath = \"healthz\"\n", "services.web.readiness.path", `invalid path "healthz": want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`},
		{"readiness http path no fragment", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\npath = \"/ready#x\"\n", "services.web.readiness.path", `invalid path "/ready#x": want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`},
		{"readiness http path no spaces", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\npath = \"/a b\"\n", "services.web.readiness.path", `invalid path "/a b": want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`},
		{"readiness port declared", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\nport = 81\n", "services.web.readiness.port", "port 81 is not declared by this service: want one of 80"},
		{"readiness port not udp", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\n[[services.web.tcp]]\nport = 54\npublish = \"0.0.0.0:54\"\n[services.web.readiness]\ntype = \"tcp\"\nport = 53\n", "services.web.readiness.port", "port 53 is declared only as UDP; readiness probes connect over TCP: want one of 54"},
		{"readiness port without interfaces", base + "[services.web.readiness]\ntype = \"http\"\nport = 9000\n", "services.web.readiness.port", "port 9000 is not declared: this service declares no HTTP or TCP port to probe"},
		{"readiness tcp needs a port", base + "[services.web.readiness]\ntype = \"tcp\"\n", "services.web.readiness.port", `readiness type "tcp" needs a port: set port to the port to probe (an internal-only port is probed from a helper container on the app network), or declare a [[services.web.tcp]] or public [[services.web.http]] interface`},
		{"readiness tcp internal-only port", base + "[[services.web.http]]\nport = 8080\n[services.web.readiness]\ntype = \"tcp\"\n", "services.web.readiness.port", `readiness type "tcp" has no published port to probe: set port to the internal HTTP port to check (8080; probed from a helper container on the app network)`},
		{"readiness port ambiguous", base + "[[services.web.tcp]]\nport = 1\npublish = \"0.0.0.0:1\"\n[[services.web.tcp]]\nport = 2\npublish = \"0.0.0.0:2\"\n[services.web.readiness]\ntype = \"tcp\"\n", "services.web.readiness.port", `readiness type "tcp" cannot choose between ports 1, 2: set port to the one to probe`},
		{"readiness log pattern", base + "[services.web.readiness]\ntype = \"log\"\n", "services.web.readiness.pattern", `required for type "log": the text the probe waits for in the container's logs`},
		{"readiness plugin name required", base + "[services.web.readiness]\ntype = \"plugin\"\n", "services.web.readiness.plugin", `required for type "plugin": the probe plugin's name (gordon-probe-<name>), e.g. "redis"`},
		{"readiness plugin name rule", base + "[services.web.readiness]\ntype = \"plugin\"\nplugin = \"My_Probe\"\n", "services.web.readiness.plugin", `invalid plugin name "My_Probe": want lowercase letters, digits or '-'`},
		{"readiness config only for plugin", base + "[services.web.readiness]\ntype = \"log\"\npattern = \"up\"\nconfig = { a = 1 }\n", "services.web.readiness.config", `config does not apply to type "log": it is used only by type "plugin"`},
		{"readiness host only for http", base + "[[services.web.tcp]]\nport = 1\npublish = \"0.0.0.0:1\"\n[services.web.readiness]\ntype = \"tcp\"\nhost = \"a.example\"\n", "services.web.readiness.host", `host does not apply to type "tcp": it is used only by type "http"`},
		{"readiness pattern only for log", base + "[services.web.readiness]\ntype = \"none\"\npattern = \"up\"\n", "services.web.readiness.pattern", `pattern does not apply to type "none": it is used only by type "log"`},
		{"readiness keys need a type", base + "[services.web.readiness]\npath = \"/\"\n", "services.web.readiness.path", `path does not apply to an unset type (the implicit probe): it is used only by type "http"`},
		{"readiness host header", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\nhost = \"http://b.example\"\n", "services.web.readiness.host", `invalid host "http://b.example": want a host name or IP, optionally with ":port", e.g. "blog.example.com"`},
		{"readiness timeout at least 1s", base + "[services.web.readiness]\ntimeout = \"0s\"\n", "services.web.readiness.timeout", "0s is out of range: want from 1s to 10m"},
		{"readiness timeout at most 10m", base + "[services.web.readiness]\ntimeout = \"11m\"\n", "services.web.readiness.timeout", "11m is out of range: want from 1s to 10m"},
		{"readiness unknown key", base + "[services.web.readiness]\nretries = 3\n", "services.web.readiness.retries", `unknown key "retries": want one of type, path, port, host, pattern, plugin, config, timeout`},
	})
}

// R30: tcp readiness of a port no interface declares is an internal-only
// probe (a redis only the app's other services reach): the port is kept,
// nothing is published, and the engine probes it from a helper container.
func TestManifest_TCPReadinessOfAnUndeclaredPortIsInternal(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+"[services.web.readiness]\ntype = \"tcp\"\nport = 6379\n"))
	require.NoError(t, err)
	require.Len(t, spec.Services, 1)
	svc := spec.Services[0]
	assert.Equal(t, 6379, svc.Readiness.Port)
	assert.Equal(t, core.ReadinessTCP, svc.Readiness.Type)
	assert.Empty(t, svc.TCP, "no interface is declared or published for it")
}
