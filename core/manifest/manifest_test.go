package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestManifest_ReportsEveryProblem: validation never stops at the first
// problem; five different problems come back together, each at its line.
func TestManifest_ReportsEveryProblem(t *testing.T) {
	doc := `name = "Blog"                       # line 1: not a DNS label

[services.web]
image = "blog:1"
stop_grace = "1h"                   # line 5: out of range
colour = "blue"                     # line 6: unknown key

[[services.web.http]]
port = 8080
host = "blog.example.com"

[[services.web.http]]
port = 8080                         # line 13: duplicate port
visibility = "internal"

[[services.web.volume]]
name = "data"
path = "/proc/data"                 # line 18: reserved path
`
	_, err := Parse("blog.toml", []byte(doc))
	var merr *ManifestError
	require.ErrorAs(t, err, &merr)
	require.ErrorIs(t, err, core.ErrInvalid)
	assert.Equal(t, "blog.toml", merr.File)

	type at struct {
		Line int
		Key  string
	}
	var got []at
	for _, p := range merr.Problems {
		got = append(got, at{p.Line, p.Key})
		assert.Equal(t, 1, p.Column, "%s starts its line", p.Key)
	}
	assert.Equal(t, []at{
		{1, "name"},
		{5, "services.web.stop_grace"},
		{6, "services.web.colour"},
		{13, "services.web.http[1].port"},
		{18, "services.web.volume[0].path"},
	}, got)

	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 5, "one problem per line:\n%s", err)
	assert.Equal(t, `blog.toml:1:1: name: invalid app name "Blog": want a DNS label: 1-63 lowercase letters, digits or '-', not starting or ending with '-'`, lines[0])
	assert.Equal(t, `blog.toml:13:1: services.web.http[1].port: port 8080/tcp is already declared by services.web.http[0]`, lines[3])
}

// TestManifest_NormalizedSpec checks the normal form Parse returns: services
// sorted by name with Name from the table key, HTTP visibility defaulted,
// secrets sorted by Env with an explicit delivery, networks sorted, non-nil
// env maps.
func TestManifest_NormalizedSpec(t *testing.T) {
	doc := `name = "shop"
networks = ["zeta", "alpha"]

[services.zz]
image = "shop/zz:1"
[[services.zz.http]]
port = 80
host = "shop.example"
[[services.zz.http]]
port = 81

[services.aa]
image = "shop/aa:1"
stop_grace = "45s"
secrets = { Z_KEY = "z", A_KEY = { name = "a", as = "file" }, M_KEY = { name = "m" } }
`
	spec, err := Parse("shop.toml", []byte(doc))
	require.NoError(t, err)
	assert.Equal(t, "shop", spec.Name)
	require.Len(t, spec.Services, 2)
	assert.Equal(t, "aa", spec.Services[0].Name)
	assert.Equal(t, "zz", spec.Services[1].Name)
	assert.Equal(t, []string{"alpha", "zeta"}, spec.Networks)
	assert.NotNil(t, spec.Env)

	aa := spec.Services[0]
	assert.Equal(t, core.Duration(45e9), aa.StopGrace)
	assert.NotNil(t, aa.Env)
	assert.Equal(t, []core.SecretRef{
		{Env: "A_KEY", Name: "a", As: "file"},
		{Env: "M_KEY", Name: "m", As: "env"},
		{Env: "Z_KEY", Name: "z", As: "env"},
	}, aa.Secrets)

	zz, ok := spec.Service("zz")
	require.True(t, ok)
	assert.Equal(t, []core.HTTPInterface{
		{Port: 80, Host: "shop.example", Visibility: core.VisibilityPublic},
		{Port: 81, Visibility: core.VisibilityInternal},
	}, zz.HTTP)
	assert.True(t, zz.HTTP[0].Public())
	assert.False(t, zz.HTTP[1].Public())
}

// TestManifest_AcceptsEdgeValues: boundary values and alternative spellings
// the rules allow.
func TestManifest_AcceptsEdgeValues(t *testing.T) {
	cases := map[string]string{
		"stop_grace 1s":                   base + "stop_grace = \"1s\"\n",
		"stop_grace 5m":                   base + "stop_grace = \"5m\"\n",
		"readiness timeout 10m":           base + "[services.web.readiness]\ntimeout = \"10m\"\n",
		"port 65535":                      base + "[[services.web.http]]\nport = 65535\n",
		"63-char names":                   strings.Replace(base, `"blog"`, `"`+strings.Repeat("a", 63)+`"`, 1),
		"registry with port":              strings.Replace(base, `"blog:1"`, `"registry.local:5000/team/blog:1.4-rc1"`, 1),
		"digest":                          strings.Replace(base, `"blog:1"`, `"blog@sha256:`+strings.Repeat("ab", 32)+`"`, 1),
		"tag and digest":                  strings.Replace(base, `"blog:1"`, `"blog:1@sha256:`+strings.Repeat("0", 64)+`"`, 1),
		"wildcard host":                   base + "[[services.web.http]]\nport = 80\nhost = \"*.example.com\"\n",
		"single-label host":               base + "[[services.web.http]]\nport = 80\nhost = \"localhost\"\n",
		"same host, other app port":       base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[[services.web.http]]\nport = 81\nhost = \"b.example\"\n",
		"replace sequential":              base + "replace = \"sequential\"\n",
		"replace overlap stateless":       base + "replace = \"overlap\"\n",
		"replicas of a stateless service": base + "replicas = 3\n[[services.web.http]]\nport = 80\nhost = \"a.example\"\n",
		"hosts sharing a port":            base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[[services.web.http]]\nport = 80\nhost = \"www.a.example\"\n",
		"run once":                        base + "run = \"once\"\ncommand = [\"migrate\"]\n",
		"same port tcp and udp":           base + "[[services.web.tcp]]\nport = 53\npublish = \"0.0.0.0:53\"\n[[services.web.udp]]\nport = 53\npublish = \"0.0.0.0:53\"\n",
		"publish distinct IPs":            base + "[[services.web.tcp]]\nport = 1\npublish = \"127.0.0.1:9000\"\n[[services.web.tcp]]\nport = 2\npublish = \"127.0.0.2:9000\"\n",
		"publish IPv6":                    base + "[[services.web.tcp]]\nport = 1\npublish = \"[::]:9000\"\n",
		"internal readiness port":         base + "[[services.web.http]]\nport = 8080\n[services.web.readiness]\ntype = \"http\"\nport = 8080\npath = \"/healthz\"\n",
		"implicit http port":              base + "[[services.web.http]]\nport = 8080\nhost = \"a.example\"\n[[services.web.http]]\nport = 9090\n[services.web.readiness]\ntype = \"http\"\n",
		"implicit tcp port":               base + "[[services.web.tcp]]\nport = 5432\npublish = \"127.0.0.1:5432\"\n[services.web.readiness]\ntype = \"tcp\"\n",
		"readiness host with port":        base + "[[services.web.http]]\nport = 80\nhost = \"a.example\"\n[services.web.readiness]\ntype = \"http\"\nhost = \"a.example:8443\"\n",
		"plugin without config":           base + "[services.web.readiness]\ntype = \"plugin\"\nplugin = \"redis\"\n",
		"empty readiness table":           base + "[services.web.readiness]\n",
		"readonly volume":                 base + "[[services.web.volume]]\nname = \"data.v1\"\npath = \"/data\"\nreadonly = true\n",
		"path beside reserved":            base + "[[services.web.volume]]\nname = \"d\"\npath = \"/devices\"\n[[services.web.bind]]\nname = \"s\"\npath = \"/run/secrets-extra\"\n",
		"secret file by dotted key":       base + "[services.web.secrets]\n\"tls.crt\" = { name = \"tls\", as = \"file\" }\nTLS = \"tls\"\n",
		"array of inline tables":          base + "http = [{ port = 80, host = \"a.example\" }, { port = 81 }]\n",
		"worker without interfaces":       base + "command = [\"/worker\", \"--queue=default\"]\n",
	}
	for name, doc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("app.toml", []byte(doc))
			assert.NoError(t, err)
		})
	}
}

// TestManifest_ErrorFormat: Error() prints file:line:col: key: message per
// problem, "file: key: message" without a position; Unwrap is ErrInvalid;
// the JSON form (validate --format json) names its fields.
func TestManifest_ErrorFormat(t *testing.T) {
	e := &ManifestError{File: "app.toml", Problems: []Problem{
		{Line: 3, Column: 7, Key: "services.web.image", Message: "bad"},
		{Key: "name", Message: "required"},
		{Line: 1, Column: 1, Message: "syntax"},
	}}
	assert.Equal(t, "app.toml:3:7: services.web.image: bad\napp.toml: name: required\napp.toml:1:1: syntax", e.Error())
	assert.True(t, errors.Is(e, core.ErrInvalid))
	assert.False(t, errors.Is(e, core.ErrNotFound))
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"file":"app.toml","problems":[
		{"line":3,"column":7,"key":"services.web.image","message":"bad"},
		{"line":0,"column":0,"key":"name","message":"required"},
		{"line":1,"column":1,"message":"syntax"}]}`, string(b))
}

// TestManifest_Load returns the spec with the sha256 of the file's bytes; a
// missing file wraps ErrNotFound; an invalid one is a *ManifestError named
// by its path (and still carries the digest).
func TestManifest_Load(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "blog.toml")
	data := []byte(base)
	require.NoError(t, os.WriteFile(good, data, 0o600))
	spec, sum, err := Load(good)
	require.NoError(t, err)
	want := sha256.Sum256(data)
	assert.Equal(t, hex.EncodeToString(want[:]), sum)
	assert.Equal(t, "blog", spec.Name)

	_, _, err = Load(filepath.Join(dir, "missing.toml"))
	require.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "missing.toml")

	bad := filepath.Join(dir, "bad.toml")
	require.NoError(t, os.WriteFile(bad, []byte("name = 1\n"), 0o600))
	_, sum, err = Load(bad)
	var merr *ManifestError
	require.ErrorAs(t, err, &merr)
	assert.Equal(t, bad, merr.File)
	assert.Len(t, sum, 64)
	assert.True(t, strings.HasPrefix(err.Error(), bad+":1:8: name: wrong type"), err.Error())

	big := filepath.Join(dir, "big.toml")
	require.NoError(t, os.WriteFile(big, make([]byte, MaxSize+1), 0o600))
	_, _, err = Load(big)
	require.ErrorIs(t, err, core.ErrInvalid)
}

// TestManifest_NormalizeIsIdempotent: Normalize of a parsed spec changes
// nothing, and it fills what a JSON round trip drops (empty env maps).
func TestManifest_NormalizeIsIdempotent(t *testing.T) {
	spec, err := Parse("app.toml", []byte(base+"[[services.web.http]]\nport = 80\n"))
	require.NoError(t, err)
	assert.Equal(t, spec, Normalize(spec))
	stripped := spec
	stripped.Env = nil
	stripped.Services = append([]core.ServiceSpec(nil), spec.Services...)
	stripped.Services[0].Env = nil
	assert.Equal(t, spec, Normalize(stripped))
}

// TestManifest_ExampleDemoParses keeps examples/demo/app.toml (the demo of
// the README and e2e tests) valid under the loader: a stateless public HTTP
// service, a stateless TCP service and a volume service.
func TestManifest_ExampleDemoParses(t *testing.T) {
	path := filepath.Join("..", "..", "examples", "demo", "app.toml")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no demo manifest: %v", err)
	}
	spec, sum, err := Load(path)
	require.NoError(t, err)
	assert.Len(t, sum, 64)
	assert.Equal(t, "demo", spec.Name)
	for _, s := range spec.Services {
		assert.NotEmpty(t, s.Image, s.Name)
	}
}
