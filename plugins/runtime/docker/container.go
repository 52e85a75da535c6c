package docker

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultGrace is the stop grace used when none is given (SPEC R25).
const DefaultGrace = 30 * time.Second

// loopback is where every container port is published (SPEC 1.1 "binds").
var loopback = netip.MustParseAddr("127.0.0.1")

// graceSeconds rounds grace up to whole seconds (the engine's unit); zero or
// negative means DefaultGrace.
func graceSeconds(grace time.Duration) int {
	if grace <= 0 {
		grace = DefaultGrace
	}
	return int(math.Ceil(grace.Seconds()))
}

// CreateContainer creates (does not start) the container c and returns its
// ID (SPEC R17.1). Mapping:
//   - c.Command, when set, replaces the image entrypoint and the image's
//     arguments are dropped (S26): Entrypoint = Command, Cmd empty.
//   - c.Ports are exposed; they are published on 127.0.0.1 with ephemeral
//     host ports only when the host cannot reach container IPs or c has no
//     Network (the loopback fallback of SPEC R18; BackendBinds reads the
//     endpoints back once started).
//   - c.Network is the primary network, with c.Aliases; c.ExtraNetworks are
//     connected after creation and before start (Engine API < 1.44 accepts
//     a single network at creation).
//   - c.HostNetwork uses the host's network namespace: no networks, no ports.
//   - c.StopGrace becomes the container's stop timeout (rounded up to whole
//     seconds; zero = 30 s).
//   - c.Mounts: volume (Source = volume name) or bind (Source = host path).
//   - c.Devices: "host[:container[:perms]]" (perms default "rwm").
//   - c.RestartPolicy: "" (no), "unless-stopped", "always", "on-failure".
//   - c.Entrypoint (non-nil) and c.Cmd (non-empty) replace the image's
//     ENTRYPOINT and CMD as docker run does (an empty Entrypoint clears
//     it); they take precedence over c.Command.
//   - c.StopSignal becomes the container's stop signal (used by stop and
//     restart); c.Healthcheck the container's healthcheck (Disable or
//     ["NONE"] turns the image's off).
//   - c.Options map one to one onto Docker's fields: User, WorkingDir,
//     Init, ReadonlyRootfs, ShmSize, Tmpfs, Ulimits, CapAdd, CapDrop,
//     Sysctls, ExtraHosts, Memory, NanoCPUs (CPUs × 1e9), PidsLimit and
//     LogConfig (nil Logging: the engine's default driver).
//
// A name already in use wraps core.ErrConflict; a missing image wraps
// core.ErrNotFound; a bad spec wraps core.ErrInvalid. When connecting an
// extra network fails the created container is removed again.
func (r *Runtime) CreateContainer(ctx context.Context, c core.ContainerSpec) (string, error) {
	if err := r.connect(ctx); err != nil {
		return "", err
	}
	what := fmt.Sprintf("create container %q", c.Name)
	cfg := containerConfig(c)
	host, err := hostConfig(c, what)
	if err != nil {
		return "", err
	}
	netCfg, err := networkConfig(c, cfg, host, what, !r.usesContainerIPs() || c.Network == "")
	if err != nil {
		return "", err
	}
	extras, err := r.extraNetworks(ctx, c, what)
	if err != nil {
		return "", err
	}

	res, err := r.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:             c.Name,
		Config:           cfg,
		HostConfig:       host,
		NetworkingConfig: netCfg,
	})
	if err != nil {
		return "", r.classify(err, what)
	}
	for _, n := range extras {
		{
			if _, err := r.cli.NetworkConnect(ctx, n, client.NetworkConnectOptions{Container: res.ID}); err != nil {
				_, _ = r.cli.ContainerRemove(context.WithoutCancel(ctx), res.ID, client.ContainerRemoveOptions{Force: true})
				return "", r.classify(err, fmt.Sprintf("%s: connect network %q", what, n))
			}
		}
	}
	return res.ID, nil
}

// containerConfig is the engine's container config of c: image, env,
// labels, hostname, stop grace and signal, entrypoint and command (an
// explicit empty entrypoint clears the image's), healthcheck, user and
// working directory.
func containerConfig(c core.ContainerSpec) *container.Config {
	stop := graceSeconds(c.StopGrace)
	cfg := &container.Config{
		Image:       c.Image,
		Env:         c.Env,
		Labels:      c.Labels,
		Hostname:    c.Hostname,
		StopTimeout: &stop,
	}
	switch {
	case c.Entrypoint != nil || len(c.Cmd) > 0:
		if c.Entrypoint != nil {
			cfg.Entrypoint = append([]string{}, c.Entrypoint...)
			if len(c.Entrypoint) == 0 {
				// Docker clears the entrypoint for [""], not for [].
				cfg.Entrypoint = []string{""}
			}
		}
		if len(c.Cmd) > 0 {
			cfg.Cmd = append([]string(nil), c.Cmd...)
		}
	case len(c.Command) > 0:
		cfg.Entrypoint = append([]string(nil), c.Command...)
		cfg.Cmd = []string{}
	}
	cfg.StopSignal = c.StopSignal
	if h := c.Healthcheck; h != nil {
		hc := &container.HealthConfig{
			Test: append([]string(nil), h.Test...), Interval: time.Duration(h.Interval), Timeout: time.Duration(h.Timeout),
			StartPeriod: time.Duration(h.StartPeriod), Retries: h.Retries,
		}
		if h.Disable || len(h.Test) == 0 {
			hc = &container.HealthConfig{Test: []string{"NONE"}}
		}
		cfg.Healthcheck = hc
	}
	cfg.User, cfg.WorkingDir = c.Options.User, c.Options.WorkingDir
	return cfg
}

// hostConfig is the engine's host config of c: options, resources,
// logging, restart policy, mounts and devices. An unknown restart policy
// or mount type, or a bad device, wraps core.ErrInvalid.
func hostConfig(c core.ContainerSpec, what string) (*container.HostConfig, error) {
	o := c.Options
	host := &container.HostConfig{
		ReadonlyRootfs: o.ReadOnly,
		ShmSize:        o.ShmSize,
		CapAdd:         o.CapAdd,
		CapDrop:        o.CapDrop,
		Sysctls:        o.Sysctls,
		ExtraHosts:     o.ExtraHosts,
	}
	if o.Init {
		init := true
		host.Init = &init
	}
	for _, t := range o.Tmpfs {
		if host.Tmpfs == nil {
			host.Tmpfs = map[string]string{}
		}
		host.Tmpfs[t.Path] = t.Options
	}
	for _, u := range o.Ulimits {
		host.Ulimits = append(host.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	host.Memory = o.Resources.Memory
	host.NanoCPUs = int64(math.Round(o.Resources.CPUs * 1e9))
	if o.Resources.Pids > 0 {
		pids := o.Resources.Pids
		host.PidsLimit = &pids
	}
	if l := o.Logging; l != nil {
		host.LogConfig = container.LogConfig{Type: l.Driver, Config: l.Options}
	}
	rp, err := restartPolicy(c.RestartPolicy)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	host.RestartPolicy = rp
	for _, m := range c.Mounts {
		var t mount.Type
		switch m.Type {
		case core.MountVolume:
			t = mount.TypeVolume
		case core.MountBind:
			t = mount.TypeBind
		default:
			return nil, fmt.Errorf("%s: %w: unknown mount type %q", what, core.ErrInvalid, m.Type)
		}
		host.Mounts = append(host.Mounts, mount.Mount{Type: t, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	for _, d := range c.Devices {
		dm, err := parseDevice(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
		}
		host.Devices = append(host.Devices, dm)
	}

	return host, nil
}

// networkConfig sets the network of c on cfg and host: the host network,
// or the app network (with c's aliases) and c's ports exposed, and, when
// publish is set, published on loopback at ports the engine picks. A bad
// port wraps core.ErrInvalid.
func networkConfig(c core.ContainerSpec, cfg *container.Config, host *container.HostConfig, what string, publish bool) (*network.NetworkingConfig, error) {
	var netCfg *network.NetworkingConfig
	if c.HostNetwork {
		host.NetworkMode = "host"
	} else {
		if len(c.Ports) > 0 {
			cfg.ExposedPorts = network.PortSet{}
			if publish {
				host.PortBindings = network.PortMap{}
			}
		}
		for _, p := range c.Ports {
			port, err := toPort(p)
			if err != nil {
				return nil, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
			}
			cfg.ExposedPorts[port] = struct{}{}
			if publish {
				host.PortBindings[port] = []network.PortBinding{{HostIP: loopback, HostPort: ""}}
			}
		}
		if c.Network != "" {
			host.NetworkMode = container.NetworkMode(c.Network)
			netCfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				c.Network: {Aliases: c.Aliases},
			}}
		}
	}

	return netCfg, nil
}

// extraNetworks resolves c's extra networks to their IDs (none on the host
// network); a missing one wraps core.ErrNotFound.
func (r *Runtime) extraNetworks(ctx context.Context, c core.ContainerSpec, what string) ([]string, error) {
	// A created container may be connected to a network that does not
	// exist (the engine only fails at start), so check extras first.
	var extras []string
	if !c.HostNetwork {
		for _, n := range c.ExtraNetworks {
			if n == c.Network {
				continue
			}
			id, err := r.findNetwork(ctx, n)
			if err != nil {
				return nil, err
			}
			if id == "" {
				return nil, fmt.Errorf("%s: network %q: %w", what, n, core.ErrNotFound)
			}
			extras = append(extras, id)
		}
	}

	return extras, nil
}

func toPort(p core.PortSpec) (network.Port, error) {
	proto := strings.ToLower(p.Protocol)
	if proto == "" {
		proto = "tcp"
	}
	if proto != "tcp" && proto != "udp" {
		return network.Port{}, fmt.Errorf("port %d: unknown protocol %q", p.Port, p.Protocol)
	}
	if p.Port <= 0 || p.Port > 65535 {
		return network.Port{}, fmt.Errorf("port %d out of range", p.Port)
	}
	port, ok := network.PortFrom(uint16(p.Port), network.IPProtocol(proto))
	if !ok {
		return network.Port{}, fmt.Errorf("port %d/%s invalid", p.Port, proto)
	}
	return port, nil
}

// parseDevice parses "host[:container[:perms]]".
func parseDevice(s string) (container.DeviceMapping, error) {
	parts := strings.Split(s, ":")
	if s == "" || len(parts) > 3 || parts[0] == "" {
		return container.DeviceMapping{}, fmt.Errorf("device %q: want host[:container[:perms]]", s)
	}
	dm := container.DeviceMapping{PathOnHost: parts[0], PathInContainer: parts[0], CgroupPermissions: "rwm"}
	if len(parts) > 1 && parts[1] != "" {
		dm.PathInContainer = parts[1]
	}
	if len(parts) > 2 && parts[2] != "" {
		dm.CgroupPermissions = parts[2]
	}
	return dm, nil
}

// StartContainer starts the exact container id. Starting a running
// container succeeds. A missing container wraps core.ErrNotFound.
func (r *Runtime) StartContainer(ctx context.Context, id string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	if _, err := r.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return r.classify(err, fmt.Sprintf("start container %s", short(id)))
	}
	return nil
}

// StopContainer sends the container's stop signal (its StopSignal, else
// the image's STOPSIGNAL, else SIGTERM: the engine reads it from the
// container, so each generation gets its own, R25) and kills the
// container after grace (rounded up to whole seconds; zero = 30 s, R25).
// The call blocks until the container has stopped; ctx should allow grace
// plus a few seconds. Stopping a stopped container succeeds; a missing one
// wraps core.ErrNotFound.
func (r *Runtime) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	t := graceSeconds(grace)
	if _, err := r.cli.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &t}); err != nil {
		return r.classify(err, fmt.Sprintf("stop container %s", short(id)))
	}
	return nil
}

// RestartContainer stops the container with grace (as StopContainer) and
// starts it again in place. A missing container wraps core.ErrNotFound.
func (r *Runtime) RestartContainer(ctx context.Context, id string, grace time.Duration) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	t := graceSeconds(grace)
	if _, err := r.cli.ContainerRestart(ctx, id, client.ContainerRestartOptions{Timeout: &t}); err != nil {
		return r.classify(err, fmt.Sprintf("restart container %s", short(id)))
	}
	return nil
}

// RemoveContainer removes the container; force kills a running one first
// (without force a running container wraps core.ErrConflict). Volumes are
// never removed (R3). A missing container wraps core.ErrNotFound.
func (r *Runtime) RemoveContainer(ctx context.Context, id string, force bool) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	if _, err := r.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: force, RemoveVolumes: false}); err != nil {
		return r.classify(err, fmt.Sprintf("remove container %s", short(id)))
	}
	return nil
}

// InspectContainer returns the container's observed state: status, the
// current execution's start time (zero when never started), health, exit
// code, env and labels. A missing container wraps core.ErrNotFound.
func (r *Runtime) InspectContainer(ctx context.Context, id string) (core.ContainerState, error) {
	if err := r.connect(ctx); err != nil {
		return core.ContainerState{}, err
	}
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return core.ContainerState{}, r.classify(err, fmt.Sprintf("inspect container %s", short(id)))
	}
	return stateOf(res.Container), nil
}

func stateOf(c container.InspectResponse) core.ContainerState {
	st := core.ContainerState{ID: c.ID, Name: strings.TrimPrefix(c.Name, "/")}
	if c.Config != nil {
		st.Image = c.Config.Image
		st.Env = c.Config.Env
		st.Labels = c.Config.Labels
		if hc := c.Config.Healthcheck; hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
			st.HasHealthcheck = true
		}
	}
	if c.HostConfig != nil {
		st.RestartPolicy = string(c.HostConfig.RestartPolicy.Name)
		if st.RestartPolicy == "" {
			st.RestartPolicy = string(container.RestartPolicyDisabled)
		}
	}
	if s := c.State; s != nil {
		st.Status = string(s.Status)
		st.ExitCode = s.ExitCode
		st.OOMKilled = s.OOMKilled
		st.StartedAt = parseEngineTime(s.StartedAt)
		if s.Health != nil && s.Health.Status != container.NoHealthcheck {
			st.Health = string(s.Health.Status)
			if n := len(s.Health.Log); n > 0 && s.Health.Log[n-1] != nil {
				last := s.Health.Log[n-1]
				st.HealthLog = strings.TrimSpace(last.Output)
				if st.HealthLog == "" {
					st.HealthLog = fmt.Sprintf("exit code %d", last.ExitCode)
				}
			}
		}
	}
	return st
}

// parseEngineTime parses an engine RFC 3339 time; "" and the zero time
// ("0001-01-01T00:00:00Z") give the zero time.Time.
func parseEngineTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t.UTC()
}

// BackendBinds returns, for each requested port, the endpoint the edge
// dials (SPEC R18), read by inspecting the exact container, which must be
// running: when the host reaches container IPs and the container's primary
// network is user-defined, the container's IP there and the container port
// (BackendBind.IP, .Network); otherwise the 127.0.0.1 host port the engine
// published (NetworkSettings.Ports). A port with no endpoint wraps
// core.ErrConflict; a missing container wraps core.ErrNotFound.
func (r *Runtime) BackendBinds(ctx context.Context, id string, ports []core.PortSpec) ([]core.BackendBind, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	what := fmt.Sprintf("read backend binds of container %s", short(id))
	res, err := r.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, r.classify(err, what)
	}
	if r.usesContainerIPs() {
		if out, ok, err := addressBinds(res.Container, ports, what); ok || err != nil {
			return out, err
		}
	}
	var published network.PortMap
	if res.Container.NetworkSettings != nil {
		published = res.Container.NetworkSettings.Ports
	}
	out := make([]core.BackendBind, 0, len(ports))
	for _, p := range ports {
		port, err := toPort(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
		}
		hostPort := 0
		for _, b := range published[port] {
			if b.HostIP.IsValid() && b.HostIP != loopback {
				continue
			}
			if n, err := strconv.Atoi(b.HostPort); err == nil && n > 0 {
				hostPort = n
				break
			}
		}
		if hostPort == 0 {
			status := ""
			if res.Container.State != nil {
				status = string(res.Container.State.Status)
			}
			return nil, fmt.Errorf("%s: %w: port %s has no 127.0.0.1 binding (container status %q)", what, core.ErrConflict, port, status)
		}
		out = append(out, core.BackendBind{ContainerPort: p.Port, HostPort: hostPort, Protocol: string(port.Proto())})
	}
	return out, nil
}

// ListManaged lists containers, running or not, whose labels include every
// given label (an empty map lists every container), inspected in full.
// Containers that vanish between listing and inspecting are skipped.
func (r *Runtime) ListManaged(ctx context.Context, labels map[string]string) ([]core.ContainerState, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	res, err := r.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: labelFilters(labels)})
	if err != nil {
		return nil, r.classify(err, "list managed containers")
	}
	out := make([]core.ContainerState, 0, len(res.Items))
	for _, s := range res.Items {
		ins, err := r.cli.ContainerInspect(ctx, s.ID, client.ContainerInspectOptions{})
		if err != nil {
			cerr := r.classify(err, fmt.Sprintf("inspect container %s", short(s.ID)))
			if isNotFound(cerr) {
				continue
			}
			return nil, cerr
		}
		out = append(out, stateOf(ins.Container))
	}
	return out, nil
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
