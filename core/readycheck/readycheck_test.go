package readycheck_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/readycheck"
)

// R29: the effective deploy-time check says where it comes from.
func TestR29_EffectiveReadinessSource(t *testing.T) {
	web := []core.HTTPInterface{{Port: 8080, Host: "a.example", Visibility: core.VisibilityPublic}}
	vol := []core.VolumeMount{{Name: "data", Path: "/data"}}
	hc := &core.Healthcheck{Test: []string{"CMD", "/check"}}
	cases := []struct {
		name     string
		spec     core.ServiceSpec
		imageHC  bool
		typ, src string
		port     int
		text     string
	}{
		{"declared none routes at start", core.ServiceSpec{HTTP: web, Volumes: vol, Readiness: core.Readiness{Type: core.ReadinessNone}}, true,
			core.ReadinessNone, readycheck.FromDeclared, 0, "none: routed as soon as it starts (declared)"},
		{"declared http", core.ServiceSpec{HTTP: web, Readiness: core.Readiness{Type: core.ReadinessHTTP, Path: "/up"}}, true,
			core.ReadinessHTTP, readycheck.FromDeclared, 8080, "http GET /up on :8080 (declared)"},
		{"manifest healthcheck", core.ServiceSpec{HTTP: web, Healthcheck: hc}, false,
			core.ReadinessDocker, readycheck.FromHealthcheck, 0, "docker health must be healthy (healthcheck)"},
		{"image HEALTHCHECK", core.ServiceSpec{HTTP: web, Volumes: vol}, true,
			core.ReadinessDocker, readycheck.FromImage, 0, "docker health must be healthy (image HEALTHCHECK)"},
		{"image HEALTHCHECK disabled by the manifest: default", core.ServiceSpec{HTTP: web, Volumes: vol, Healthcheck: &core.Healthcheck{Disable: true}}, true,
			core.ReadinessTCP, readycheck.FromDefault, 8080, "tcp connect :8080 (default)"},
		{"volume-backed HTTP: default TCP connect", core.ServiceSpec{HTTP: web, Volumes: vol}, false,
			core.ReadinessTCP, readycheck.FromDefault, 8080, "tcp connect :8080 (default)"},
		{"stateless HTTP: default HTTP GET /", core.ServiceSpec{HTTP: web}, false,
			core.ReadinessHTTP, readycheck.FromDefault, 8080, "http GET / on :8080 (default)"},
		{"worker: nothing to probe", core.ServiceSpec{Volumes: vol}, false,
			core.ReadinessNone, readycheck.FromDefault, 0, "none (no HTTP or TCP interface to probe)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := readycheck.Deploy(&tc.spec, tc.imageHC)
			assert.Equal(t, tc.typ, got.Type)
			assert.Equal(t, tc.src, got.Source)
			assert.Equal(t, tc.port, got.Port)
			assert.Equal(t, tc.text, got.String())
		})
	}
}
