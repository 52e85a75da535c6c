package main

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core"
)

// warmProbes starts, in the background, the built-in probe plugins that
// spec's readiness checks will use (probe/http, probe/tcp, probe/log), so
// their start and handshake (about 40-60 ms each) overlap the runtime and
// traffic plugins' starts instead of delaying the probe phase. A failed start is not reported here: the probe phase asks the
// plugin host again, which starts it afresh and reports the error.
func warmProbes(ctx context.Context, env *cliEnv, spec core.AppSpec) {
	host, err := env.pluginHost()
	if err != nil {
		return
	}
	seen := map[string]bool{}
	for _, s := range spec.Services {
		switch kind := s.Readiness.Type; kind {
		case core.ReadinessHTTP, core.ReadinessTCP, core.ReadinessLog:
			if !seen[kind] {
				seen[kind] = true
				go func() { _, _ = host.Probe(ctx, kind) }()
			}
		}
	}
}
