package docker

import (
	"context"
	"fmt"
	"net/url"
	"os"
	goruntime "runtime"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// EnvLoopbackBackends, set to "1", makes the runtime publish every backend
// port on 127.0.0.1 and report those host ports instead of container
// addresses (SPEC R18's loopback fallback), whatever the engine offers.
const EnvLoopbackBackends = "GORDON_LOOPBACK_BACKENDS"

// reachesContainerIPs decides, from the engine's address and its
// /info, whether this host dials container IPs (SPEC R18): true only for a
// Linux engine on the local unix socket that is not Docker Desktop (whose
// containers live in a VM the host cannot route to) and without
// GORDON_LOOPBACK_BACKENDS=1. The answer is why, for Info and errors.
func reachesContainerIPs(host, goos, operatingSystem, env string) (bool, string) {
	switch {
	case env == "1":
		return false, EnvLoopbackBackends + "=1"
	case goos != "linux":
		return false, "the host OS is " + goos + ", which cannot route to container IPs"
	case strings.Contains(strings.ToLower(operatingSystem), "docker desktop"):
		return false, "Docker Desktop runs containers in a VM the host cannot route to"
	}
	u, err := url.Parse(host)
	if err != nil || u.Scheme != "unix" {
		return false, "the engine at " + host + " is not on this host's unix socket"
	}
	return true, ""
}

// detectAddressing runs reachesContainerIPs once against the engine's /info
// and caches the decision on r (an unreadable /info means loopback).
// Called by connect with r.mu held.
func (r *Runtime) detectAddressing(ctx context.Context) {
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		// Without /info the engine might be Docker Desktop: loopback is
		// the answer that works everywhere.
		r.containerIPs, r.loopbackWhy = false, "docker info failed: "+err.Error()
		return
	}
	r.containerIPs, r.loopbackWhy = reachesContainerIPs(r.host, goruntime.GOOS, info.Info.OperatingSystem, os.Getenv(EnvLoopbackBackends))
}

// usesContainerIPs reports the cached decision of detectAddressing.
func (r *Runtime) usesContainerIPs() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.containerIPs
}

// addressBinds returns the endpoints of ports at the container's IP on its
// primary network (HostConfig.NetworkMode, the ContainerSpec.Network it was
// created with), or ok=false when it has no user-defined primary network
// (then the caller falls back to loopback publications). A running
// container without an address there, or a port it does not expose, wraps
// core.ErrConflict.
func addressBinds(c container.InspectResponse, ports []core.PortSpec, what string) ([]core.BackendBind, bool, error) {
	if c.HostConfig == nil || c.NetworkSettings == nil || c.Config == nil {
		return nil, false, nil
	}
	netName := string(c.HostConfig.NetworkMode)
	switch netName {
	case "", "default", "bridge", "host", "none":
		return nil, false, nil
	}
	if strings.HasPrefix(netName, "container:") {
		return nil, false, nil
	}
	ep := c.NetworkSettings.Networks[netName]
	ip := ""
	if ep != nil && ep.IPAddress.IsValid() && !ep.IPAddress.IsUnspecified() {
		ip = ep.IPAddress.String()
	} else if ep != nil && ep.GlobalIPv6Address.IsValid() {
		ip = ep.GlobalIPv6Address.String()
	}
	if ip == "" {
		status := ""
		if c.State != nil {
			status = string(c.State.Status)
		}
		return nil, true, fmt.Errorf("%s: %w: no address on network %s (container status %q; it must be running)", what, core.ErrConflict, netName, status)
	}
	out := make([]core.BackendBind, 0, len(ports))
	for _, p := range ports {
		port, err := toPort(p)
		if err != nil {
			return nil, true, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
		}
		if _, exposed := c.Config.ExposedPorts[port]; !exposed {
			return nil, true, fmt.Errorf("%s: %w: port %s is not exposed by the container", what, core.ErrConflict, port)
		}
		out = append(out, core.BackendBind{ContainerPort: p.Port, HostPort: p.Port, Protocol: string(port.Proto()), IP: ip, Network: netName})
	}
	return out, true, nil
}
