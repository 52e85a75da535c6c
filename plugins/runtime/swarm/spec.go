package swarm

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultGrace is the stop grace period of an instance created with none
// (SPEC R25).
const DefaultGrace = 30 * time.Second

// DefaultStartTimeout bounds StartContainer's wait for a running task when
// Options.StartTimeout is zero: long enough for a node to pull an image,
// short enough that a task no node can take (its pinned node is down)
// fails the start instead of hanging it.
const DefaultStartTimeout = 3 * time.Minute

// refusedCopyImages is the reason every node must pull from a registry.
const refusedCopyImages = "push it to a registry the nodes can reach; --copy-images does not work on a swarm"

// serviceSpec maps one instance c onto a one-task Swarm service, created
// with 0 replicas (created, not running). Mapping:
//   - the service and its container carry c.Labels; c.Name names the
//     service;
//   - endpoint mode dnsrr, no published port (no ingress, no VIP), no
//     UpdateConfig or RollbackConfig (the engine keeps its own overlap);
//   - c.Entrypoint/c.Cmd, else c.Command, become Command/Args as docker
//     run would apply them (an empty Entrypoint clears the image's);
//   - c.StopSignal, c.StopGrace (zero = 30 s), c.Healthcheck, c.Hostname,
//     c.Env and the options Swarm has (user, working dir, init, read-only
//     root, tmpfs and shm size as tmpfs mounts, ulimits, capabilities,
//     sysctls, extra hosts, CPU/memory/pids limits, log driver);
//   - c.Network (required: the app's attachable overlay) with c.Aliases,
//     then c.ExtraNetworks (never the edge's control overlay);
//   - c.RestartPolicy "" → none, "unless-stopped"/"always" → any,
//     "on-failure" → on-failure;
//   - named volumes, each created by the node's engine at the task's
//     start with the instance's managed and app labels; bind mounts when
//     c.Node pins the instance to the node that has the path; file
//     secrets (Mount.Secret) are left to CreateContainer, which makes
//     them Docker secrets (secrets.go).
//
// The placement constraint of a single-writer instance is added by
// CreateContainer (placement.go).
//
// Refused with core.ErrInvalid, saying why: no network, the host network,
// a bind mount without c.Node and devices (each names something on one
// node), an unknown mount type, restart policy or tmpfs option, a bad
// port.
func serviceSpec(c core.ContainerSpec) (swarm.ServiceSpec, error) {
	what := fmt.Sprintf("create swarm instance %q", c.Name)
	if err := refused(c); err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("%s: %w: %s", what, core.ErrInvalid, err)
	}
	cs, err := containerSpec(c)
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
	}
	rp, err := restartPolicy(c.RestartPolicy)
	if err != nil {
		return swarm.ServiceSpec{}, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
	}
	zero := uint64(0)
	spec := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: c.Name, Labels: copyLabels(c.Labels)},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: cs,
			RestartPolicy: rp,
			Networks:      networks(c),
			Resources:     resources(c.Options.Resources),
		},
		Mode:         swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &zero}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR},
	}
	if l := c.Options.Logging; l != nil {
		spec.TaskTemplate.LogDriver = &swarm.Driver{Name: l.Driver, Options: l.Options}
	}
	withPlacement(&spec, c)
	return spec, nil
}

// refused says why c cannot run as a Swarm service ("" when it can).
func refused(c core.ContainerSpec) error {
	switch {
	case c.HostNetwork:
		return fmt.Errorf("the host network is not available to a swarm instance (it is reached at its task IP on the app's overlay)")
	case c.Network == "":
		return fmt.Errorf("a swarm instance needs the app's network (an attachable overlay): the edge reaches it at its task IP there")
	case len(c.Devices) > 0:
		return fmt.Errorf("devices %v name a node's device files and a task may run on any node; Swarm services cannot map devices", c.Devices)
	}
	for _, m := range c.Mounts {
		if m.Type == core.MountBind && m.Secret == "" && m.Config == "" && c.Node == "" {
			return fmt.Errorf(`bind mount %s:%s names a path on one node, and an unpinned task may run on any node: pin the service to the node that has the path with node = "<hostname>" (compose: x-gordon.node), or use a named volume`, m.Source, m.Target)
		}
	}
	for _, p := range c.Ports {
		if err := checkPort(p); err != nil {
			return err
		}
	}
	return nil
}

// checkPort validates one container port (tcp or udp, 1..65535).
func checkPort(p core.PortSpec) error {
	proto := strings.ToLower(p.Protocol)
	if proto != "" && proto != "tcp" && proto != "udp" {
		return fmt.Errorf("port %d: unknown protocol %q", p.Port, p.Protocol)
	}
	if p.Port <= 0 || p.Port > 65535 {
		return fmt.Errorf("port %d out of range", p.Port)
	}
	return nil
}

// containerSpec is the task's container: image, command, env, labels,
// stop signal and grace, healthcheck, options and mounts.
func containerSpec(c core.ContainerSpec) (*swarm.ContainerSpec, error) {
	o := c.Options
	grace := c.StopGrace
	if grace <= 0 {
		grace = DefaultGrace
	}
	cs := &swarm.ContainerSpec{
		Image: c.Image, Labels: copyLabels(c.Labels), Hostname: c.Hostname, Env: c.Env,
		Dir: o.WorkingDir, User: o.User, StopSignal: c.StopSignal, ReadOnly: o.ReadOnly,
		StopGracePeriod: &grace, Sysctls: o.Sysctls, CapabilityAdd: o.CapAdd, CapabilityDrop: o.CapDrop,
		Healthcheck: healthConfig(c.Healthcheck),
	}
	cs.Command, cs.Args = command(c)
	if o.Init {
		init := true
		cs.Init = &init
	}
	for _, u := range o.Ulimits {
		cs.Ulimits = append(cs.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	for _, h := range o.ExtraHosts {
		name, ip, ok := strings.Cut(h, ":")
		if !ok {
			return nil, fmt.Errorf("extra host %q: want name:ip", h)
		}
		cs.Hosts = append(cs.Hosts, ip+" "+name) // Swarm's /etc/hosts order
	}
	mounts, err := mounts(c)
	if err != nil {
		return nil, err
	}
	cs.Mounts = mounts
	return cs, nil
}

// command maps c's entrypoint and command onto Swarm's Command (replaces
// the image's ENTRYPOINT, and then the image's CMD is dropped) and Args
// (replaces the image's CMD).
func command(c core.ContainerSpec) (cmd, args []string) {
	switch {
	case c.Entrypoint != nil || len(c.Cmd) > 0:
		if c.Entrypoint != nil {
			cmd = append([]string{}, c.Entrypoint...)
			if len(cmd) == 0 {
				cmd = []string{""} // Docker clears the entrypoint for [""]
			}
		}
		if len(c.Cmd) > 0 {
			args = append([]string(nil), c.Cmd...)
		}
	case len(c.Command) > 0:
		cmd = append([]string(nil), c.Command...)
	}
	return cmd, args
}

// healthConfig is the container's healthcheck (nil: the image's).
func healthConfig(h *core.Healthcheck) *container.HealthConfig {
	if h == nil {
		return nil
	}
	if h.Disable || len(h.Test) == 0 {
		return &container.HealthConfig{Test: []string{"NONE"}}
	}
	return &container.HealthConfig{
		Test: append([]string(nil), h.Test...), Interval: time.Duration(h.Interval), Timeout: time.Duration(h.Timeout),
		StartPeriod: time.Duration(h.StartPeriod), Retries: h.Retries,
	}
}

// withImageHealthcheck writes the image's HEALTHCHECK hc (nil: none) into
// a task container that declares none. The node's engine runs that check
// anyway; written into the service, it tells InspectContainer (stateOf)
// that the instance has one, so the health Swarm reports through the
// task's state (starting until healthy, failed when unhealthy) is read as
// the container's, as docker readiness needs.
func withImageHealthcheck(cs *swarm.ContainerSpec, hc *container.HealthConfig) {
	if cs == nil || cs.Healthcheck != nil || hc == nil || len(hc.Test) == 0 || hc.Test[0] == "NONE" {
		return
	}
	c := *hc
	c.Test = append([]string(nil), hc.Test...)
	cs.Healthcheck = &c
}

// mounts maps c's named volumes, bind mounts, tmpfs mounts and shm size. A volume is
// created by the engine of the node the task lands on, labelled with the
// instance's managed and app labels.
func mounts(c core.ContainerSpec) ([]mount.Mount, error) {
	var out []mount.Mount
	vlabels := map[string]string{}
	for _, k := range []string{core.LabelManaged, core.LabelApp} {
		if v, ok := c.Labels[k]; ok {
			vlabels[k] = v
		}
	}
	for _, m := range c.Mounts {
		switch {
		case m.Secret != "": // a Docker secret (secrets.go)
		case m.Config != "": // a Docker config (configs.go)
		case m.Type == core.MountVolume:
			out = append(out, mount.Mount{Type: mount.TypeVolume, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly,
				VolumeOptions: &mount.VolumeOptions{Labels: copyLabels(vlabels)}})
		case m.Type == core.MountBind: // refused unless c.Node pins the task (refused)
			out = append(out, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
		default:
			return nil, fmt.Errorf("unknown mount type %q", m.Type)
		}
	}
	for _, t := range c.Options.Tmpfs {
		opts, err := tmpfsOptions(t.Options)
		if err != nil {
			return nil, fmt.Errorf("tmpfs %s: %w", t.Path, err)
		}
		out = append(out, mount.Mount{Type: mount.TypeTmpfs, Target: t.Path, TmpfsOptions: opts})
	}
	if s := c.Options.ShmSize; s > 0 {
		out = append(out, mount.Mount{Type: mount.TypeTmpfs, Target: "/dev/shm", TmpfsOptions: &mount.TmpfsOptions{SizeBytes: s}})
	}
	return out, nil
}

// tmpfsOptions parses Docker's "size=64m,mode=1777" (the two options a
// Swarm tmpfs mount has); anything else is an error.
func tmpfsOptions(s string) (*mount.TmpfsOptions, error) {
	if s == "" {
		return nil, nil
	}
	o := &mount.TmpfsOptions{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		switch k {
		case "size":
			n, err := units.RAMInBytes(v)
			if err != nil {
				return nil, fmt.Errorf("size %q: %w", v, err)
			}
			o.SizeBytes = n
		case "mode":
			n, err := strconv.ParseUint(v, 8, 32)
			if err != nil {
				return nil, fmt.Errorf("mode %q: want octal", v)
			}
			o.Mode = os.FileMode(n)
		default:
			return nil, fmt.Errorf("option %q: a swarm tmpfs mount takes only size and mode", kv)
		}
	}
	return o, nil
}

// restartPolicy maps the instance's policy onto a Swarm condition.
func restartPolicy(p string) (*swarm.RestartPolicy, error) {
	var cond swarm.RestartPolicyCondition
	switch p {
	case "", "no":
		cond = swarm.RestartPolicyConditionNone
	case "unless-stopped", "always":
		cond = swarm.RestartPolicyConditionAny
	case "on-failure":
		cond = swarm.RestartPolicyConditionOnFailure
	default:
		return nil, fmt.Errorf("unknown restart policy %q", p)
	}
	return &swarm.RestartPolicy{Condition: cond}, nil
}

// restartPolicyName is the engine's name of a Swarm condition ("always"
// for any: Swarm does not tell unless-stopped from always).
func restartPolicyName(p *swarm.RestartPolicy) string {
	if p == nil {
		return "always" // Swarm's default condition is any
	}
	switch p.Condition {
	case swarm.RestartPolicyConditionNone:
		return "no"
	case swarm.RestartPolicyConditionOnFailure:
		return "on-failure"
	default:
		return "always"
	}
}

// networks attaches the task to c.Network (with c.Aliases), then to each
// extra network once: never to the edge's control overlay nor to another
// app's network (the edge joins the app's, edgejoin.go).
func networks(c core.ContainerSpec) []swarm.NetworkAttachmentConfig {
	out := []swarm.NetworkAttachmentConfig{{Target: c.Network, Aliases: append([]string(nil), c.Aliases...)}}
	seen := map[string]bool{c.Network: true, "": true}
	for _, n := range c.ExtraNetworks {
		if !seen[n] {
			seen[n] = true
			out = append(out, swarm.NetworkAttachmentConfig{Target: n})
		}
	}
	return out
}

// resources maps the limits (nil when there are none).
func resources(r core.Resources) *swarm.ResourceRequirements {
	if r.Memory == 0 && r.CPUs == 0 && r.Pids == 0 {
		return nil
	}
	return &swarm.ResourceRequirements{Limits: &swarm.Limit{
		NanoCPUs: int64(math.Round(r.CPUs * 1e9)), MemoryBytes: r.Memory, Pids: r.Pids,
	}}
}

func copyLabels(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
