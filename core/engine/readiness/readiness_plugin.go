package readiness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gordon-deploy/docker-gordon/core"
)

// PluginReadinessProblem is one problem of a service's custom readiness
// plugin found before deploying (R13, R29): the plugin is missing,
// or its ValidateConfig rejected the config.
type PluginReadinessProblem struct {
	// Service is the service name.
	Service string `json:"service"`
	// Plugin is the declared readiness.plugin.
	Plugin string `json:"plugin"`
	// Key is the manifest key the problem belongs to:
	// "services.<service>.readiness.plugin" (plugin not found) or
	// "services.<service>.readiness.config" (a config message).
	Key string `json:"key"`
	// Message is the plugin's own message, or why the plugin was not found.
	Message string `json:"message"`
}

// String formats the problem as "key: plugin NAME: message".
func (p PluginReadinessProblem) String() string {
	return fmt.Sprintf("%s: plugin %s: %s", p.Key, p.Plugin, p.Message)
}

// PluginReadinessError lists every PluginReadinessProblem of one app. It
// wraps ErrInvalid, and also ErrNotFound when a plugin was not found.
type PluginReadinessError struct {
	App      string                   `json:"app"`
	Problems []PluginReadinessProblem `json:"problems"`
	notFound bool
}

// Error prints one problem per line, the first prefixed with the app.
func (e *PluginReadinessError) Error() string {
	lines := make([]string, 0, len(e.Problems))
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	return fmt.Sprintf("app %s: readiness plugin check failed: %s", e.App, strings.Join(lines, "\n"))
}

// Unwrap makes errors.Is hold for ErrInvalid, and for ErrNotFound when a
// plugin was missing.
func (e *PluginReadinessError) Unwrap() []error {
	if e.notFound {
		return []error{core.ErrInvalid, core.ErrNotFound}
	}
	return []error{core.ErrInvalid}
}

// ValidatePluginReadiness checks, before any workload mutation (R13
// preflight), every service in services whose deploy-time
// readiness (R29, DeployReadiness) is type "plugin": the plugin must be
// found through probes (Prober(ctx, "plugin", name)) and its ValidateConfig
// must accept readiness.config (sent as JSON; absent = nil). Services of
// other types are skipped without resolving anything.
//
// Returns nil when everything is accepted; a *PluginReadinessError (wraps
// ErrInvalid, plus ErrNotFound for a missing plugin) listing every missing
// plugin and every config message, with the manifest key each belongs to;
// or, at the first plugin that exists but cannot be started or answered
// (crash, protocol mismatch, hang bounded by ctx), that error wrapped with
// app/service/plugin context, keeping its class (ErrPluginExited,
// ErrUnavailable, or ctx's error).
func ValidatePluginReadiness(ctx context.Context, probes core.ProbeSet, app string, services []core.ServiceSpec) error {
	perr := &PluginReadinessError{App: app}
	for i := range services {
		s := &services[i]
		r := DeployReadiness(s)
		if r.Type != core.ReadinessPlugin {
			continue
		}
		base := "services." + s.Name + ".readiness"
		if probes == nil {
			return fmt.Errorf("%w: app %s service %s: readiness plugin %s: no probe backends configured", core.ErrUnavailable, app, s.Name, r.Plugin)
		}
		// Starting the plugin is bounded by the service's readiness budget,
		// so a plugin that never answers its handshake fails as fast as a
		// readiness timeout (not the host's longer start timeout).
		pctx, cancel := context.WithTimeout(ctx, OrDefault(r.Timeout.D(), DefaultReadinessTimeout))
		p, err := probes.Prober(pctx, core.ReadinessPlugin, r.Plugin)
		startTimedOut := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err != nil && startTimedOut {
			err = fmt.Errorf("%w: plugin did not complete its handshake within the readiness timeout %s: %w", core.ErrUnavailable, OrDefault(r.Timeout.D(), DefaultReadinessTimeout), err)
		}
		if err != nil {
			if ctx.Err() == nil && errors.Is(err, core.ErrNotFound) {
				perr.notFound = true
				perr.Problems = append(perr.Problems, PluginReadinessProblem{
					Service: s.Name, Plugin: r.Plugin, Key: base + ".plugin",
					Message: fmt.Sprintf("not found: install an executable named gordon-probe-%s on the plugin path (--plugin-dir, GORDON_PLUGIN_PATH or <state>/plugins) (%v)", r.Plugin, err),
				})
				continue
			}
			return fmt.Errorf("app %s service %s: readiness plugin %s: %w", app, s.Name, r.Plugin, err)
		}
		var config json.RawMessage
		if len(r.Config) > 0 {
			b, err := json.Marshal(r.Config)
			if err != nil {
				return fmt.Errorf("%w: app %s service %s: readiness config: %w", core.ErrInvalid, app, s.Name, err)
			}
			config = b
		}
		msgs, err := p.ValidateConfig(ctx, config)
		if err != nil {
			return fmt.Errorf("app %s service %s: readiness plugin %s: validate config: %w", app, s.Name, r.Plugin, err)
		}
		for _, m := range msgs {
			perr.Problems = append(perr.Problems, PluginReadinessProblem{Service: s.Name, Plugin: r.Plugin, Key: base + ".config", Message: m})
		}
	}
	if len(perr.Problems) > 0 {
		return perr
	}
	return nil
}
