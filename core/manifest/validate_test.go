package manifest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// base is a valid manifest that the table cases extend.
const base = `name = "blog"

[services.web]
image = "blog:1"
`

// parseProblems parses doc and returns its problems (nil when valid).
func parseProblems(t *testing.T, doc string) []Problem {
	t.Helper()
	_, err := Parse("app.toml", []byte(doc))
	if err == nil {
		return nil
	}
	var merr *ManifestError
	require.ErrorAs(t, err, &merr, "every failure is a *ManifestError")
	require.ErrorIs(t, err, core.ErrInvalid)
	return merr.Problems
}

// TestManifest_Validation has one case per validation rule (ARCHITECTURE §8
// and the brief's rules): the manifest must be refused with exactly one
// problem, at the given key, with the given message.
func TestManifest_Validation(t *testing.T) {
	cases := []struct {
		name, doc, key, msg string
	}{
		// App.
		{"name required", "[services.web]\nimage = \"blog:1\"\n", "name", `required: the app name, a DNS label such as "blog"`},
		{"name DNS label", strings.Replace(base, `"blog"`, `"-blog"`, 1), "name", `invalid app name "-blog": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"name at most 63", strings.Replace(base, `"blog"`, `"`+strings.Repeat("a", 64)+`"`, 1), "name", `invalid app name "` + strings.Repeat("a", 64) + `": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"at least one service", "name = \"blog\"\n", "services", "at least one service is required: add a [services.<name>] table with an image"},
		{"unknown top-level key", base + "[deploy]\nstrategy = \"x\"\n", "deploy", `unknown key "deploy": want one of name, env, services, networks`},
		{"network name", `networks = ["ok", "bad name"]` + "\n" + base, "networks[1]", `invalid network name "bad name": want a letter or digit followed by letters, digits, '_', '.' or '-'`},
		{"network listed twice", `networks = ["edge", "edge"]` + "\n" + base, "networks[1]", `network "edge" is already listed at networks[0]`},
		{"app env name", base + "[env]\n\"A-B\" = \"1\"\n", "env.A-B", `invalid environment variable name "A-B": want a letter or '_' followed by letters, digits or '_'`},

		// Service basics.
		{"service name DNS label", "name = \"blog\"\n[services.Web]\nimage = \"blog:1\"\n", "services.Web", `invalid service name "Web": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`},
		{"image required", "name = \"blog\"\n[services.web]\nstop_grace = \"5s\"\n", "services.web.image", `required: the image reference, e.g. "registry.example/blog:1.4" or "name@sha256:<64 hex digits>"`},
		{"image no spaces", strings.Replace(base, `"blog:1"`, `"blog app:1"`, 1), "services.web.image", `invalid image reference "blog app:1": contains whitespace or control characters; want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`},
		{"image lowercase repository", strings.Replace(base, `"blog:1"`, `"Blog:1"`, 1), "services.web.image", `invalid image reference "Blog:1": repository name must be lowercase; want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`},
		{"image digest is 64 hex", strings.Replace(base, `"blog:1"`, `"blog@sha256:abc"`, 1), "services.web.image", `invalid image reference "blog@sha256:abc": not of the form [registry[:port]/]name[:tag][@sha256:<64 hex digits>]; want e.g. "nginx:1.27", "registry.example:5000/team/app:1.4" or "name@sha256:<64 hex digits>"`},
		{"command arguments not empty", base + "command = [\"/app\", \"\"]\n", "services.web.command[1]", "argument must be a non-empty string"},
		{"replace value", base + "replace = \"rolling\"\n", "services.web.replace", `invalid replace "rolling": want "overlap" (start the new generation before stopping the old; stateless services only) or "sequential" (stop the old one first)`},
		{"replace overlap needs eligibility", base + "replace = \"overlap\"\n[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n", "services.web.replace", `replace = "overlap" cannot be honoured: the service is replaced sequentially (single-writer: volume data), so two generations never run at once; remove replace or use "sequential"`},
		{"internal http shares no port", base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[[services.web.http]]\nport = 80\n", "services.web.http[1].port", "port 80/tcp is already declared by services.web.http[0]"},
		{"tcp shares no port with http", base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[[services.web.tcp]]\nport = 80\npublish = \"0.0.0.0:81\"\n", "services.web.tcp[0].port", "port 80/tcp is already declared by services.web.http[0]"},
		{"run value", base + "run = \"twice\"\n", "services.web.run", `invalid run "twice": want "once" (a one-shot run to completion at each deploy), or omit run for a service kept running`},
		{"run once serves nothing", base + "run = \"once\"\n[[services.web.http]]\nport = 80\nhost = \"a.example\"\n", "services.web.http", `a one-shot service (run = "once") runs to completion and serves nothing: remove its http interfaces`},
		{"run once has no readiness", base + "run = \"once\"\n[services.web.readiness]\ntype = \"log\"\npattern = \"x\"\n", "services.web.readiness", `a one-shot service (run = "once") runs to completion and serves nothing: it is waited for until it exits (status 0); remove readiness`},
		{"stop_grace parses", base + "stop_grace = \"soon\"\n", "services.web.stop_grace", `invalid duration "soon": want a Go duration from 1s to 5m, such as "30s" or "2m"`},
		{"stop_grace at least 1s", base + "stop_grace = \"500ms\"\n", "services.web.stop_grace", "500ms is out of range: want from 1s to 5m"},
		{"stop_grace at most 5m", base + "stop_grace = \"5m1s\"\n", "services.web.stop_grace", "5m1s is out of range: want from 1s to 5m"},
		{"service env name", base + "[services.web.env]\n\"9LIVES\" = \"x\"\n", "services.web.env.9LIVES", `invalid environment variable name "9LIVES": want a letter or '_' followed by letters, digits or '_'`},
		{"env value is a string", base + "[services.web.env]\nDEBUG = true\n", "services.web.env.DEBUG", `value must be a string, got a boolean: quote it, e.g. DEBUG = "true"`},
		{"env value not a table", base + "[services.web.env]\nX = { a = \"b\" }\n", "services.web.env.X", "value must be a string, got a table"},
		{"unknown service key", base + "replicas = 2\n", "services.web.replicas", `unknown key "replicas": want one of image, entrypoint, command, stop_grace, stop_signal, env, secrets, http, tcp, udp, readiness, healthcheck, volume, bind, devices, depends_on, user, working_dir, init, read_only, shm_size, tmpfs, ulimits, cap_add, cap_drop, sysctls, extra_hosts, labels, resources, logging, replace, run`},
		{"wrong type", base + "stop_grace = 30\n", "services.web.stop_grace", "wrong type: want a string, got an integer"},
		{"wrong type in array", base + "http = [{ port = 80 }, { port = \"81\" }]\n", "services.web.http[1].port", "wrong type: want an integer, got a string"},
		{"wrong type for a map", "name = \"blog\"\nenv = []\n[services.web]\nimage = \"blog:1\"\n", "env", "wrong type: want a table, got an array"},
		{"interfaces are arrays of tables", base + "[services.web.tcp]\nport = 9000\npublish = \"0.0.0.0:9000\"\n", "services.web.tcp", "wrong type: want an array of tables, written [[services.web.tcp]], got a table"},
		{"services is a table", "name = \"blog\"\n[[services]]\nimage = \"blog:1\"\n", "services", "wrong type: want a table, got an array of tables"},

		// Container keys (compose's names).
		{"stop_signal is a signal", base + "stop_signal = \"SIGSTOPNOW\"\n", "services.web.stop_signal", `unknown signal "SIGSTOPNOW": want a Linux signal name such as "SIGTERM", "SIGINT", "SIGQUIT" or "SIGUSR1" (or its number)`},
		{"memory is a size", base + "[services.web.resources]\nmemory = \"lots\"\n", "services.web.resources.memory", `invalid size "lots": want a size such as "64m", "512m" or "2g" (units b, k, m, g, t; 1024-based) or an integer number of bytes`},
		{"cpus positive", base + "[services.web.resources]\ncpus = -1\n", "services.web.resources.cpus", "invalid cpus -1: want more than 0 (at least 0.001) and at most 1024 CPUs, e.g. 0.5 or 2"},
		{"tmpfs path absolute", base + "tmpfs = [\"tmp:size=1m\"]\n", "services.web.tmpfs[0]", `invalid tmpfs "tmp:size=1m": path "tmp" must be absolute, e.g. "/var/lib/data"; want "path" or "path:options", e.g. "/tmp:size=64m,mode=1777"`},
		{"depends_on cycle", "name = \"blog\"\n[services.a]\nimage = \"a:1\"\ndepends_on = [\"b\"]\n[services.b]\nimage = \"b:1\"\ndepends_on = [\"a\"]\n", "services.a.depends_on[0]", "dependency cycle: a -> b -> a; remove one of these depends_on entries"},
		{"depends_on known", base + "depends_on = [\"db\"]\n", "services.web.depends_on[0]", `unknown service "db": the app has no other service`},
		{"memory at least 6m", base + "[services.web.resources]\nmemory = \"1m\"\n", "services.web.resources.memory", "memory limit 1m is below Docker's minimum of 6m"},
		{"ulimit soft above hard", base + "ulimits = { nofile = { soft = 10, hard = 5 } }\n", "services.web.ulimits.nofile", "invalid ulimit nofile: soft limit 10 is above hard limit 5"},
		{"healthcheck unknown key", base + "[services.web.healthcheck]\ntest = \"true\"\nevery = \"1s\"\n", "services.web.healthcheck.every", `unknown key "every": want one of test, interval, timeout, retries, start_period, disable`},

		// Secrets.
		{"secret value shape", base + "[services.web.secrets]\nTOKEN = 5\n", "services.web.secrets.TOKEN", `want a secret name (a string) or an inline table { name = "...", as = "file" | "env" }, got an integer`},
		{"secret name required", base + "[services.web.secrets]\nTOKEN = { as = \"env\" }\n", "services.web.secrets.TOKEN.name", `required: the secret's name, as given to "docker gordon secrets set"`},
		{"secret name rule", base + "[services.web.secrets]\nTOKEN = \".token\"\n", "services.web.secrets.TOKEN", `invalid secret name ".token": want letters, digits, '_', '.' or '-', not starting with '.'`},
		{"secret name rule in table", base + "[services.web.secrets]\nTOKEN = { name = \"a/b\" }\n", "services.web.secrets.TOKEN.name", `invalid secret name "a/b": want letters, digits, '_', '.' or '-', not starting with '.'`},
		{"secret as", base + "[services.web.secrets]\nTOKEN = { name = \"t\", as = \"volume\" }\n", "services.web.secrets.TOKEN.as", `invalid delivery "volume": want "env" (an environment variable) or "file" (/run/secrets/<name>)`},
		{"secret unknown key", base + "[services.web.secrets]\nTOKEN = { name = \"t\", mode = \"0400\" }\n", "services.web.secrets.TOKEN.mode", `unknown key "mode": want one of name, as`},
		{"secret env name", base + "[services.web.secrets]\n\"API-KEY\" = \"api\"\n", "services.web.secrets.API-KEY", `invalid environment variable name "API-KEY": want a letter or '_' followed by letters, digits or '_'`},
		{"secret file name", base + "[services.web.secrets]\n\".cert\" = { name = \"cert\", as = \"file\" }\n", "services.web.secrets..cert", `invalid secret file name ".cert": want letters, digits, '_', '.' or '-', not starting with '.'`},
		{"secret file unique", base + "[services.web.secrets]\nA = { name = \"cert\", as = \"file\" }\nB = { name = \"cert\", as = \"file\" }\n", "services.web.secrets.B", `secret "cert" is already delivered as a file by services.web.secrets.A: each file secret must name a different secret`},
		{"secret vs service env", base + "[services.web.env]\nTOKEN = \"x\"\n[services.web.secrets]\nTOKEN = \"t\"\n", "services.web.secrets.TOKEN", "TOKEN is also set in services.web.env: a variable comes from env or from a secret, not both"},
		{"secret vs app env", "name = \"blog\"\n[env]\nTOKEN = \"x\"\n[services.web]\nimage = \"blog:1\"\n[services.web.secrets]\nTOKEN = \"t\"\n", "services.web.secrets.TOKEN", "TOKEN is also set in the app-wide env: a variable comes from env or from a secret, not both"},

		// HTTP.
		{"http port required", base + "[[services.web.http]]\nhost = \"blog.example.com\"\n", "services.web.http[0].port", "required: the container port, want a port number from 1 to 65535"},
		{"http port range", base + "[[services.web.http]]\nport = 65536\n", "services.web.http[0].port", "invalid port 65536: want a port number from 1 to 65535"},
		{"http response_timeout parses", base + "[[services.web.http]]\nport = 80\nresponse_timeout = \"soon\"\n", "services.web.http[0].response_timeout", `invalid duration "soon": want a Go duration from 1s to 1h, such as "30s" or "2m"`},
		{"http response_timeout at least 1s", base + "[[services.web.http]]\nport = 80\nresponse_timeout = \"500ms\"\n", "services.web.http[0].response_timeout", "500ms is out of range: want from 1s to 1h"},
		{"http response_timeout at most 1h", base + "[[services.web.http]]\nport = 80\nresponse_timeout = \"2h\"\n", "services.web.http[0].response_timeout", "2h is out of range: want from 1s to 1h"},
		{"http host lowercase", base + "[[services.web.http]]\nport = 80\nhost = \"Blog.example.com\"\n", "services.web.http[0].host", `invalid host "Blog.example.com": want a lowercase DNS name such as "blog.example.com" or a wildcard such as "*.example.com", without scheme, port or path`},
		{"http host no port", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com:8080\"\n", "services.web.http[0].host", `invalid host "blog.example.com:8080": want a lowercase DNS name such as "blog.example.com" or a wildcard such as "*.example.com", without scheme, port or path`},
		{"http host wildcard only leading", base + "[[services.web.http]]\nport = 80\nhost = \"blog.*.com\"\n", "services.web.http[0].host", `invalid host "blog.*.com": want a lowercase DNS name such as "blog.example.com" or a wildcard such as "*.example.com", without scheme, port or path`},
		{"public requires host", base + "[[services.web.http]]\nport = 80\nvisibility = \"public\"\n", "services.web.http[0].visibility", `visibility "public" needs a host: set host = "app.example.com", or drop visibility to make the interface internal`},
		{"internal forbids host", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\nvisibility = \"internal\"\n", "services.web.http[0].host", `an internal interface has no host: remove host, or set visibility = "public"`},
		{"visibility values", base + "[[services.web.http]]\nport = 80\nvisibility = \"private\"\n", "services.web.http[0].visibility", `invalid visibility "private": want "public" (with a host) or "internal" (without)`},
		{"public host unique in app", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\n[services.api]\nimage = \"api:1\"\n[[services.api.http]]\nport = 81\nhost = \"blog.example.com\"\n", "services.api.http[0].host", `host "blog.example.com" is already routed by services.web.http[0]: a public host belongs to one interface of the app`},
		{"tcp ports unique per service", base + "[[services.web.http]]\nport = 8080\n[[services.web.tcp]]\nport = 8080\npublish = \"0.0.0.0:8080\"\n", "services.web.tcp[0].port", "port 8080/tcp is already declared by services.web.http[0]"},
		{"tls values", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\ntls = \"on\"\n", "services.web.http[0].tls", `invalid tls "on": want "auto" (certificate obtained, HTTP redirected once served), "always" (HTTP always redirected) or "never" (plain HTTP only)`},
		{"tls needs public", base + "[[services.web.http]]\nport = 80\ntls = \"always\"\n", "services.web.http[0].tls", `tls applies to a public interface: set host, or remove tls`},
		{"protocol values", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\nprotocol = \"h2\"\n", "services.web.http[0].protocol", `invalid protocol "h2": want "http1" (default) or "h2c" (cleartext HTTP/2 to the backend, e.g. gRPC)`},
		{"unknown http key", base + "[[services.web.http]]\nport = 80\npath = \"/\"\n", "services.web.http[0].path", `unknown key "path": want one of port, host, visibility, response_timeout, tls, protocol`},

		// TCP and UDP.
		{"tcp port required", base + "[[services.web.tcp]]\npublish = \"0.0.0.0:9000\"\n", "services.web.tcp[0].port", "required: the container port, want a port number from 1 to 65535"},
		{"tcp publish required", base + "[[services.web.tcp]]\nport = 9000\n", "services.web.tcp[0].publish", `required: the edge's listen address "IP:port", e.g. "0.0.0.0:9000"`},
		{"publish is an IP", base + "[[services.web.tcp]]\nport = 9000\npublish = \"localhost:9000\"\n", "services.web.tcp[0].publish", `invalid publish "localhost:9000": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish port range", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:0\"\n", "services.web.udp[0].publish", `invalid publish "0.0.0.0:0": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish IPv6 bracketed", base + "[[services.web.tcp]]\nport = 9000\npublish = \"::1:9000\"\n", "services.web.tcp[0].publish", `invalid publish "::1:9000": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish IPv4 not bracketed", base + "[[services.web.tcp]]\nport = 9000\npublish = \"[127.0.0.1]:9000\"\n", "services.web.tcp[0].publish", `invalid publish "[127.0.0.1]:9000": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish unique in app", base + "[[services.web.tcp]]\nport = 9000\npublish = \"127.0.0.1:9000\"\n[services.api]\nimage = \"api:1\"\n[[services.api.tcp]]\nport = 9001\npublish = \"127.0.0.1:9000\"\n", "services.api.tcp[0].publish", `publish "127.0.0.1:9000" (tcp) overlaps "127.0.0.1:9000" of services.web.tcp[0].publish: an edge listen address serves one interface`},
		{"publish wildcard covers", base + "[[services.web.udp]]\nport = 53\npublish = \"[::]:53\"\n[[services.web.udp]]\nport = 54\npublish = \"10.0.0.1:53\"\n", "services.web.udp[1].publish", `publish "10.0.0.1:53" (udp) overlaps "[::]:53" of services.web.udp[0].publish: an edge listen address serves one interface`},
		{"udp ports unique per service", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\n[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:54\"\n", "services.web.udp[1].port", "port 53/udp is already declared by services.web.udp[0]"},

		// Readiness.
		{"readiness type", base + "[services.web.readiness]\ntype = \"grpc\"\n", "services.web.readiness.type", `unknown readiness type "grpc": want one of "none", "http", "tcp", "log", "plugin" or "docker"`},
		{"readiness http path origin-form", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\npath = \"healthz\"\n", "services.web.readiness.path", `invalid path "healthz": want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`},
		{"readiness http path no fragment", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\npath = \"/ready#x\"\n", "services.web.readiness.path", `invalid path "/ready#x": want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`},
		{"readiness http path no spaces", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\npath = \"/a b\"\n", "services.web.readiness.path", `invalid path "/a b": want an origin-form path starting with "/", e.g. "/healthz" (no spaces, no '#')`},
		{"readiness port declared", base + "[[services.web.http]]\nport = 80\nhost = \"b.example\"\n[services.web.readiness]\ntype = \"http\"\nport = 81\n", "services.web.readiness.port", "port 81 is not declared by this service: want one of 80"},
		{"readiness port not udp", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\n[[services.web.tcp]]\nport = 54\npublish = \"0.0.0.0:54\"\n[services.web.readiness]\ntype = \"tcp\"\nport = 53\n", "services.web.readiness.port", "port 53 is declared only as UDP; readiness probes connect over TCP: want one of 54"},
		{"readiness port without interfaces", base + "[services.web.readiness]\ntype = \"tcp\"\nport = 9000\n", "services.web.readiness.port", "port 9000 is not declared: this service declares no HTTP or TCP port to probe"},
		{"readiness tcp needs a port", base + "[services.web.readiness]\ntype = \"tcp\"\n", "services.web.readiness.port", `readiness type "tcp" needs a port: declare a [[services.web.tcp]] or public [[services.web.http]] interface, or use type "log"`},
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

		// Volumes, binds, devices.
		{"volume name required", base + "[[services.web.volume]]\npath = \"/data\"\n", "services.web.volume[0].name", "required: the volume name"},
		{"volume name rule", base + "[[services.web.volume]]\nname = \"_data\"\npath = \"/data\"\n", "services.web.volume[0].name", `invalid volume name "_data": want a letter or digit followed by letters, digits, '_', '.' or '-'`},
		{"volume path required", base + "[[services.web.volume]]\nname = \"data\"\n", "services.web.volume[0].path", `required: the absolute path inside the container, e.g. "/var/lib/data"`},
		{"volume path absolute", base + "[[services.web.volume]]\nname = \"data\"\npath = \"data\"\n", "services.web.volume[0].path", `path "data" must be absolute, e.g. "/var/lib/data"`},
		{"volume path clean", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/srv/../data/\"\n", "services.web.volume[0].path", `path "/srv/../data/" is not clean: want "/data"`},
		{"volume path not root", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/\"\n", "services.web.volume[0].path", `path "/" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"volume path not under /run/secrets", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/run/secrets/x\"\n", "services.web.volume[0].path", `path "/run/secrets/x" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"bind path not /sys", base + "[[services.web.bind]]\nname = \"cfg\"\npath = \"/sys\"\n", "services.web.bind[0].path", `path "/sys" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"bind path not under /dev", base + "[[services.web.bind]]\nname = \"cfg\"\npath = \"/dev/shm\"\n", "services.web.bind[0].path", `path "/dev/shm" is reserved: /, /proc, /sys, /dev and /run/secrets (and anything below the last four) cannot be mount targets`},
		{"bind name required", base + "[[services.web.bind]]\npath = \"/etc/app\"\n", "services.web.bind[0].name", "required: the bind name (the key of an operator-approved path in the bind policy)"},
		{"bind name rule", base + "[[services.web.bind]]\nname = \"my config\"\npath = \"/etc/app\"\n", "services.web.bind[0].name", `invalid bind name "my config": want a letter or digit followed by letters, digits, '_', '.' or '-'`},
		{"bind readonly is a boolean", base + "[[services.web.bind]]\nname = \"cfg\"\npath = \"/etc/app\"\nreadonly = \"yes\"\n", "services.web.bind[0].readonly", "wrong type: want a boolean, got a string"},
		{"mount paths unique", base + "[[services.web.volume]]\nname = \"data\"\npath = \"/data\"\n[[services.web.bind]]\nname = \"cfg\"\npath = \"/data\"\n", "services.web.bind[0].path", `path "/data" is already mounted by services.web.volume[0]: each container path takes one mount`},
		{"device under /dev", base + "devices = [\"/tmp/gpu\"]\n", "services.web.devices[0]", `invalid device "/tmp/gpu": want a clean absolute path under /dev, e.g. "/dev/ttyUSB0"`},
		{"device not /dev itself", base + "devices = [\"/dev/\"]\n", "services.web.devices[0]", `invalid device "/dev/": want a clean absolute path under /dev, e.g. "/dev/ttyUSB0"`},
		{"device listed once", base + "devices = [\"/dev/fuse\", \"/dev/fuse\"]\n", "services.web.devices[1]", `device "/dev/fuse" is already listed at services.web.devices[0]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			problems := parseProblems(t, tc.doc)
			require.Len(t, problems, 1, "problems: %v", problems)
			assert.Equal(t, tc.key, problems[0].Key)
			assert.Equal(t, tc.msg, problems[0].Message)
			if missingTopLevel := tc.name == "name required" || tc.name == "at least one service"; !missingTopLevel {
				assert.Positive(t, problems[0].Line, "the problem is located in the source")
			} else {
				assert.Zero(t, problems[0].Line, "a missing top-level key has no position")
			}
		})
	}
}
