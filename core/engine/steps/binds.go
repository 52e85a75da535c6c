package steps

import (
	"context"
	"fmt"
	"maps"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"

	"github.com/gordon-deploy/docker-gordon/core"
)

// endpoints is where the edge reaches one instance (SPEC R18): for each
// TCP and UDP container port, the port dialled at ip; ip is the
// container's address on network, or "" for 127.0.0.1 (loopback fallback).
type Endpoints struct {
	tcp, udp    map[int]int
	ip, network string
}

// endpointsOf folds the runtime's binds of one container into endpoints.
func EndpointsOf(binds []core.BackendBind) Endpoints {
	var ep Endpoints
	for _, b := range binds {
		if b.IP != "" {
			ep.ip, ep.network = b.IP, b.Network
		}
		if b.Protocol == "udp" {
			if ep.udp == nil {
				ep.udp = map[int]int{}
			}
			ep.udp[b.ContainerPort] = b.HostPort
			continue
		}
		if ep.tcp == nil {
			ep.tcp = map[int]int{}
		}
		ep.tcp[b.ContainerPort] = b.HostPort
	}
	return ep
}

// instanceEndpoints reads the endpoints recorded for in.
func InstanceEndpoints(in core.Instance) Endpoints {
	return Endpoints{tcp: in.BackendBinds, udp: in.UDPBackendBinds, ip: in.IP, network: in.Network}
}

// instance returns the instance id with ep's endpoints (maps cloned).
func (ep Endpoints) Instance(id string) core.Instance {
	return core.Instance{Container: id, BackendBinds: maps.Clone(ep.tcp), UDPBackendBinds: maps.Clone(ep.udp), IP: ep.ip, Network: ep.network}
}

// clone returns ep with its maps copied.
func (ep Endpoints) Clone() Endpoints {
	ep.tcp, ep.udp = maps.Clone(ep.tcp), maps.Clone(ep.udp)
	return ep
}

// setOn records ep as a's primary instance's endpoints.
func (ep Endpoints) SetOn(a *core.ActiveService) {
	a.BackendBinds, a.UDPBackendBinds, a.IP, a.Network = ep.tcp, ep.udp, ep.ip, ep.network
}

// setOnResult records ep on a service result.
func (ep Endpoints) SetOnResult(r *ServiceResult) {
	r.BackendBinds, r.UDPBackendBinds, r.IP, r.Network = ep.tcp, ep.udp, ep.ip, ep.network
}

// resultEndpoints reads the endpoints recorded on a service result.
func ResultEndpoints(r ServiceResult) Endpoints {
	return Endpoints{tcp: r.BackendBinds, udp: r.UDPBackendBinds, ip: r.IP, network: r.Network}
}

// activeEndpoints reads the endpoints of a's primary instance.
func ActiveEndpoints(a *core.ActiveService) Endpoints {
	return Endpoints{tcp: a.BackendBinds, udp: a.UDPBackendBinds, ip: a.IP, network: a.Network}
}

// equal reports whether ep and o name the same endpoints.
func (ep Endpoints) Equal(o Endpoints) bool {
	return ep.ip == o.ip && ep.network == o.network && maps.Equal(ep.tcp, o.tcp) && maps.Equal(ep.udp, o.udp)
}

// empty reports whether ep has no bind.
func (ep Endpoints) Empty() bool { return len(ep.tcp)+len(ep.udp) == 0 }

// verifyBinds is SPEC R18's check before an address is routed: the runtime
// read binds by inspecting container id itself, so an address binds carry
// must be on the app's own network (NetworkName(app)), where no other app's
// container can hold one, or on the edge network edgeNet when one is set
// (a swarm's shared overlay: the address was just read from this
// instance's own task), and all binds of the container share one
// address. A violation wraps core.ErrConflict and names what to do.
func VerifyBinds(app, id, edgeNet string, binds []core.BackendBind) error {
	ip := ""
	for _, b := range binds {
		if b.IP == "" {
			continue
		}
		if b.Network != NetworkName(app) && (edgeNet == "" || b.Network != edgeNet) {
			return fmt.Errorf("%w: container %s of app %s answers at %s on network %q, not the app's network %s: not routed; redeploy the app (`docker gordon deploy`)",
				core.ErrConflict, readiness.ShortID(id), app, b.IP, b.Network, NetworkName(app))
		}
		if ip != "" && b.IP != ip {
			return fmt.Errorf("%w: container %s of app %s reported two addresses (%s, %s): not routed", core.ErrConflict, readiness.ShortID(id), app, ip, b.IP)
		}
		ip = b.IP
	}
	return nil
}

// binds lists ep as the runtime's binds (for readiness targets).
func (ep Endpoints) Binds() []core.BackendBind {
	var out []core.BackendBind
	for c, p := range ep.tcp {
		out = append(out, core.BackendBind{ContainerPort: c, HostPort: p, Protocol: "tcp", IP: ep.ip, Network: ep.network})
	}
	for c, p := range ep.udp {
		out = append(out, core.BackendBind{ContainerPort: c, HostPort: p, Protocol: "udp", IP: ep.ip, Network: ep.network})
	}
	return out
}

// readBinds reads the container's endpoints for the spec's backend ports
// from the live container (SPEC R18), verifies them (verifyBinds) and
// re-registers the claims of its loopback binds.
func (e *Engine) ReadBinds(ctx context.Context, app, id string, spec *core.ServiceSpec) (Endpoints, error) {
	ports := spec.BackendPorts()
	if len(ports) == 0 {
		return Endpoints{}, nil
	}
	binds, err := e.Runtime.BackendBinds(ctx, id, ports)
	if err != nil {
		return Endpoints{}, fmt.Errorf("read backend binds of %s: %w", id, err)
	}
	if err := VerifyBinds(app, id, e.EdgeNetwork, binds); err != nil {
		return Endpoints{}, err
	}
	if err := e.RegisterBackendClaims(ctx, app, id, binds); err != nil {
		return Endpoints{}, fmt.Errorf("register claims of %s: %w", id, err)
	}
	return EndpointsOf(binds), nil
}

// registerBackendClaims registers a backend claim (owner
// core.ClaimOwnerBackend) of app on each of container id's loopback binds,
// so no other app publishes those host ports (R21); binds at a container
// address hold no host port and claim nothing. It returns the store's
// error unwrapped; callers say which step failed.
func (e *Engine) RegisterBackendClaims(ctx context.Context, app, id string, binds []core.BackendBind) error {
	claims := make([]core.Claim, 0, len(binds))
	for _, b := range binds {
		if b.IP != "" {
			continue
		}
		claims = append(claims, core.Claim{Port: b.HostPort, Protocol: b.Protocol, Owner: core.ClaimOwnerBackend, App: app, Container: id})
	}
	return e.Store.RegisterClaims(ctx, claims)
}

// CloneInstances returns a deep copy of ins (nil for none).
func CloneInstances(ins []core.Instance) []core.Instance {
	var out []core.Instance
	for _, in := range ins {
		out = append(out, InstanceEndpoints(in).Instance(in.Container))
	}
	return out
}
