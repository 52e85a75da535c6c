package readiness_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
)

// rpPluginSet is a ProbeSet of custom plugins by name; asked lists every
// resolution.
type rpPluginSet struct {
	plugins map[string]core.Prober
	err     map[string]error
	asked   []string
}

func (s *rpPluginSet) Prober(_ context.Context, kind, name string) (core.Prober, error) {
	s.asked = append(s.asked, kind+"/"+name)
	if err := s.err[name]; err != nil {
		return nil, err
	}
	if p, ok := s.plugins[name]; ok && kind == core.ReadinessPlugin {
		return p, nil
	}
	return nil, fmt.Errorf("plugin probe/%s: %w", name, core.ErrNotFound)
}

// rpCfgProbe rejects configs with a "bad" key and records what it saw.
type rpCfgProbe struct{ seen []string }

func (p *rpCfgProbe) Describe(context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: "cfg"}, nil
}

func (p *rpCfgProbe) ValidateConfig(_ context.Context, c json.RawMessage) ([]string, error) {
	p.seen = append(p.seen, string(c))
	var m map[string]any
	_ = json.Unmarshal(c, &m)
	if _, bad := m["bad"]; bad {
		return []string{`unknown config key "bad"`}, nil
	}
	return nil, nil
}

func (p *rpCfgProbe) Check(context.Context, core.ProbeRequest) (core.ProbeResult, error) {
	return core.ProbeResult{Ready: true}, nil
}

func rpService(name, plugin string, config map[string]any) core.ServiceSpec {
	return core.ServiceSpec{
		Name:      name,
		Image:     "img",
		HTTP:      []core.HTTPInterface{{Port: 8080, Host: name + ".test"}},
		Readiness: core.Readiness{Type: core.ReadinessPlugin, Plugin: plugin, Config: config},
	}
}

// R13 preflight: accepted configs pass; non-plugin services resolve no
// plugin at all.
func TestR13_PluginReadinessAccepted(t *testing.T) {
	p := &rpCfgProbe{}
	set := &rpPluginSet{plugins: map[string]core.Prober{"grpc": p}}
	services := []core.ServiceSpec{
		rpService("api", "grpc", map[string]any{"service": "x"}),
		{Name: "web", Image: "img", HTTP: []core.HTTPInterface{{Port: 8080, Host: "w.test"}}},
		rpService("worker", "grpc", nil),
	}
	require.NoError(t, readiness.ValidatePluginReadiness(context.Background(), set, "blog", services))
	assert.Equal(t, []string{"plugin/grpc", "plugin/grpc"}, set.asked)
	assert.Equal(t, []string{`{"service":"x"}`, ""}, p.seen, "config sent as JSON; absent config sent as nil")
}

// R13 preflight: every missing plugin and every config message is
// reported at once, with the manifest key; the error is ErrInvalid (and
// ErrNotFound for the missing plugin).
func TestR13_PluginReadinessProblemsListed(t *testing.T) {
	set := &rpPluginSet{plugins: map[string]core.Prober{"grpc": &rpCfgProbe{}}}
	services := []core.ServiceSpec{
		rpService("api", "grpc", map[string]any{"bad": 1}),
		rpService("db", "redis", nil),
	}
	err := readiness.ValidatePluginReadiness(context.Background(), set, "blog", services)
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.ErrorIs(t, err, core.ErrNotFound)
	var perr *readiness.PluginReadinessError
	require.True(t, errors.As(err, &perr))
	require.Len(t, perr.Problems, 2)
	assert.Equal(t, "services.api.readiness.config", perr.Problems[0].Key)
	assert.Equal(t, `unknown config key "bad"`, perr.Problems[0].Message)
	assert.Equal(t, "services.db.readiness.plugin", perr.Problems[1].Key)
	assert.Contains(t, perr.Problems[1].Message, "gordon-probe-redis")
	assert.Contains(t, err.Error(), `services.api.readiness.config: plugin grpc: unknown config key "bad"`)
}

// R13 preflight: only config messages → ErrInvalid but not ErrNotFound.
func TestR13_PluginReadinessConfigOnlyIsInvalid(t *testing.T) {
	set := &rpPluginSet{plugins: map[string]core.Prober{"grpc": &rpCfgProbe{}}}
	err := readiness.ValidatePluginReadiness(context.Background(), set, "blog",
		[]core.ServiceSpec{rpService("api", "grpc", map[string]any{"bad": true})})
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.NotErrorIs(t, err, core.ErrNotFound)
}

// R13 preflight: a plugin that exists but cannot start keeps its class and
// is named with the service.
func TestR13_PluginReadinessBrokenPluginKeepsClass(t *testing.T) {
	set := &rpPluginSet{err: map[string]error{"crash": fmt.Errorf("plugin probe/crash exited: %w", core.ErrPluginExited)}}
	err := readiness.ValidatePluginReadiness(context.Background(), set, "blog",
		[]core.ServiceSpec{rpService("api", "crash", nil)})
	require.ErrorIs(t, err, core.ErrPluginExited)
	assert.Contains(t, err.Error(), "service api")
	assert.Contains(t, err.Error(), "crash")
}
