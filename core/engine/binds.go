package engine

import (
	"context"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
)

func dpBindMaps(binds []core.BackendBind) (tcp, udp map[int]int) {
	for _, b := range binds {
		if b.Protocol == "udp" {
			if udp == nil {
				udp = map[int]int{}
			}
			udp[b.ContainerPort] = b.HostPort
			continue
		}
		if tcp == nil {
			tcp = map[int]int{}
		}
		tcp[b.ContainerPort] = b.HostPort
	}
	return tcp, udp
}

// readBinds reads the container's loopback binds for the spec's backend
// ports and re-registers its claims.
func (e *Engine) readBinds(ctx context.Context, app, id string, spec *core.ServiceSpec) (tcp, udp map[int]int, err error) {
	ports := spec.BackendPorts()
	if len(ports) == 0 {
		return nil, nil, nil
	}
	binds, err := e.Runtime.BackendBinds(ctx, id, ports)
	if err != nil {
		return nil, nil, fmt.Errorf("read backend binds of %s: %w", id, err)
	}
	tcp, udp = dpBindMaps(binds)
	if err := e.registerBackendClaims(ctx, app, id, binds); err != nil {
		return nil, nil, fmt.Errorf("register claims of %s: %w", id, err)
	}
	return tcp, udp, nil
}

func bindList(tcp, udp map[int]int) []core.BackendBind {
	var out []core.BackendBind
	for c, h := range tcp {
		out = append(out, core.BackendBind{ContainerPort: c, HostPort: h, Protocol: "tcp"})
	}
	for c, h := range udp {
		out = append(out, core.BackendBind{ContainerPort: c, HostPort: h, Protocol: "udp"})
	}
	return out
}

// registerBackendClaims registers a backend claim (owner
// core.ClaimOwnerBackend) of app on each of container id's loopback binds,
// so no other app publishes those host ports (R21). It returns the store's
// error unwrapped; callers say which step failed.
func (e *Engine) registerBackendClaims(ctx context.Context, app, id string, binds []core.BackendBind) error {
	claims := make([]core.Claim, 0, len(binds))
	for _, b := range binds {
		claims = append(claims, core.Claim{Port: b.HostPort, Protocol: b.Protocol, Owner: core.ClaimOwnerBackend, App: app, Container: id})
	}
	return e.Store.RegisterClaims(ctx, claims)
}
