package manifest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManifest_ValidationHTTP: [[http]] ports, hosts, visibility,
// response_timeout, tls and protocol; a public host belongs to one
// interface of the app.
func TestManifest_ValidationHTTP(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"internal http shares no port", base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[[services.web.http]]\nport = 80\n", "services.web.http[1].port", "port 80/tcp is already declared by services.web.http[0]"},
		{"tcp shares no port with http", base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[[services.web.tcp]]\nport = 80\npublish = \"0.0.0.0:81\"\n", "services.web.tcp[0].port", "port 80/tcp is already declared by services.web.http[0]"},
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
		{"unknown http key", base + "[[services.web.http]]\nport = 80\npath = \"/\"\n", "services.web.http[0].path", `unknown key "path": want one of port, host, visibility, response_timeout, tls, protocol, hsts, basic_auth, allow`},
		{"hsts values", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\nhsts = \"1 year\"\n", "services.web.http[0].hsts", `invalid hsts "1 year": want "max-age=SECONDS", optionally followed by "; includeSubDomains" and "; preload"`},
		{"hsts needs public", base + "[[services.web.http]]\nport = 80\nhsts = \"max-age=60\"\n", "services.web.http[0].hsts", `hsts applies to a public interface: set host, or remove hsts`},
		{"hsts needs https", base + "[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\ntls = \"never\"\nhsts = \"max-age=60\"\n", "services.web.http[0].hsts", `hsts needs HTTPS: remove hsts, or set tls to "auto" or "always"`},
	})
}

// TestManifest_ValidationTCPUDP: [[tcp]] and [[udp]] ports and edge
// listen addresses; overlapping listen addresses are refused app-wide.
func TestManifest_ValidationTCPUDP(t *testing.T) {
	checkRefusals(t, []refusalCase{
		{"tcp port required", base + "[[services.web.tcp]]\npublish = \"0.0.0.0:9000\"\n", "services.web.tcp[0].port", "required: the container port, want a port number from 1 to 65535"},
		{"tcp idle_timeout at least 1s", base + "[[services.web.tcp]]\nport = 9000\npublish = \"0.0.0.0:9000\"\nidle_timeout = \"10ms\"\n", "services.web.tcp[0].idle_timeout", "10ms is out of range: want from 1s to 24h"},
		{"udp max_conns at least 1", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\nmax_conns = 0\n", "services.web.udp[0].max_conns", "invalid max_conns 0: want from 1 to 100000 connections (or sessions) at once"},
		{"tcp publish required", base + "[[services.web.tcp]]\nport = 9000\n", "services.web.tcp[0].publish", `required: the edge's listen address "IP:port", e.g. "0.0.0.0:9000"`},
		{"publish is an IP", base + "[[services.web.tcp]]\nport = 9000\npublish = \"localhost:9000\"\n", "services.web.tcp[0].publish", `invalid publish "localhost:9000": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish port range", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:0\"\n", "services.web.udp[0].publish", `invalid publish "0.0.0.0:0": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish IPv6 bracketed", base + "[[services.web.tcp]]\nport = 9000\npublish = \"::1:9000\"\n", "services.web.tcp[0].publish", `invalid publish "::1:9000": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish IPv4 not bracketed", base + "[[services.web.tcp]]\nport = 9000\npublish = \"[127.0.0.1]:9000\"\n", "services.web.tcp[0].publish", `invalid publish "[127.0.0.1]:9000": want "IP:port" with an IPv4 address or a bracketed IPv6 address and a port from 1 to 65535, e.g. "0.0.0.0:9000" or "[::]:9000"`},
		{"publish unique in app", base + "[[services.web.tcp]]\nport = 9000\npublish = \"127.0.0.1:9000\"\n[services.api]\nimage = \"api:1\"\n[[services.api.tcp]]\nport = 9001\npublish = \"127.0.0.1:9000\"\n", "services.api.tcp[0].publish", `publish "127.0.0.1:9000" (tcp) overlaps "127.0.0.1:9000" of services.web.tcp[0].publish: an edge listen address serves one interface`},
		{"publish wildcard covers", base + "[[services.web.udp]]\nport = 53\npublish = \"[::]:53\"\n[[services.web.udp]]\nport = 54\npublish = \"10.0.0.1:53\"\n", "services.web.udp[1].publish", `publish "10.0.0.1:53" (udp) overlaps "[::]:53" of services.web.udp[0].publish: an edge listen address serves one interface`},
		{"udp ports unique per service", base + "[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\n[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:54\"\n", "services.web.udp[1].port", "port 53/udp is already declared by services.web.udp[0]"},
	})
}

// TestManifest_HTTPHSTS: an [[http]] hsts value is carried into the
// interface's spec as written.
func TestManifest_HTTPHSTS(t *testing.T) {
	spec, err := Parse("app.toml", []byte("name = \"blog\"\n[services.web]\nimage = \"blog:1\"\n[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\nhsts = \"max-age=31536000; includeSubDomains\"\n"))
	require.NoError(t, err)
	assert.Equal(t, "max-age=31536000; includeSubDomains", spec.Services[0].HTTP[0].HSTS)
}

// TestManifest_HTTPResponseTimeout: an [[http]] response_timeout is parsed
// into the interface's spec.
func TestManifest_HTTPResponseTimeout(t *testing.T) {
	spec, err := Parse("app.toml", []byte("name = \"blog\"\n[services.web]\nimage = \"blog:1\"\n[[services.web.http]]\nport = 80\nhost = \"blog.example.com\"\nresponse_timeout = \"90s\"\n"))
	require.NoError(t, err)
	require.Len(t, spec.Services[0].HTTP, 1)
	assert.Equal(t, 90*time.Second, spec.Services[0].HTTP[0].ResponseTimeout.D())
}
