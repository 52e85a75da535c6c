package runtime

import (
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Conversions between core runtime types and their proto messages. Zero
// times and durations travel as unset fields; nil and empty maps/slices
// are not distinguished.

func infoToProto(i core.RuntimeInfo) *pb.RuntimeInfo {
	return &pb.RuntimeInfo{Name: i.Name, Version: i.Version, ApiVersion: i.APIVersion, Os: i.OS, Arch: i.Arch}
}

func infoFromProto(p *pb.RuntimeInfo) core.RuntimeInfo {
	return core.RuntimeInfo{Name: p.GetName(), Version: p.GetVersion(), APIVersion: p.GetApiVersion(), OS: p.GetOs(), Arch: p.GetArch()}
}

func imageToProto(i core.ImageRef) *pb.ImageRef {
	return &pb.ImageRef{Ref: i.Ref, Digest: i.Digest, Local: i.Local, Id: i.ID, Volumes: i.Volumes, StopSignal: i.StopSignal, HasHealthcheck: i.HasHealthcheck}
}

func imageFromProto(p *pb.ImageRef) core.ImageRef {
	return core.ImageRef{Ref: p.GetRef(), Digest: p.GetDigest(), Local: p.GetLocal(), ID: p.GetId(), Volumes: p.GetVolumes(), StopSignal: p.GetStopSignal(), HasHealthcheck: p.GetHasHealthcheck()}
}

func networkToProto(n core.NetworkSpec) *pb.NetworkSpec {
	return &pb.NetworkSpec{Name: n.Name, Labels: n.Labels, Internal: n.Internal}
}

func networkFromProto(p *pb.NetworkSpec) core.NetworkSpec {
	return core.NetworkSpec{Name: p.GetName(), Labels: p.GetLabels(), Internal: p.GetInternal()}
}

func volumeToProto(v core.VolumeSpec) *pb.VolumeSpec {
	return &pb.VolumeSpec{Name: v.Name, Labels: v.Labels}
}

func volumeFromProto(p *pb.VolumeSpec) core.VolumeSpec {
	return core.VolumeSpec{Name: p.GetName(), Labels: p.GetLabels()}
}

func portsToProto(ps []core.PortSpec) []*pb.PortSpec {
	if len(ps) == 0 {
		return nil
	}
	out := make([]*pb.PortSpec, len(ps))
	for i, p := range ps {
		out[i] = &pb.PortSpec{Port: int32(p.Port), Protocol: p.Protocol}
	}
	return out
}

func portsFromProto(ps []*pb.PortSpec) []core.PortSpec {
	if len(ps) == 0 {
		return nil
	}
	out := make([]core.PortSpec, len(ps))
	for i, p := range ps {
		out[i] = core.PortSpec{Port: int(p.GetPort()), Protocol: p.GetProtocol()}
	}
	return out
}

func containerSpecToProto(c core.ContainerSpec) *pb.ContainerSpec {
	out := &pb.ContainerSpec{
		Name: c.Name, Image: c.Image, Command: c.Command, Env: c.Env, Labels: c.Labels,
		Hostname: c.Hostname, Network: c.Network, Aliases: c.Aliases, ExtraNetworks: c.ExtraNetworks,
		Ports: portsToProto(c.Ports), Devices: c.Devices, StopGrace: wire.DurationToProto(c.StopGrace),
		RestartPolicy: c.RestartPolicy, HostNetwork: c.HostNetwork,
		Entrypoint: c.Entrypoint, EntrypointSet: c.Entrypoint != nil, Cmd: c.Cmd, StopSignal: c.StopSignal,
		Healthcheck: healthcheckToProto(c.Healthcheck), Options: optionsToProto(c.Options), Node: c.Node,
	}
	for _, m := range c.Mounts {
		out.Mounts = append(out.Mounts, &pb.Mount{Type: m.Type, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly, Secret: m.Secret, Config: m.Config})
	}
	return out
}

func containerSpecFromProto(p *pb.ContainerSpec) core.ContainerSpec {
	out := core.ContainerSpec{
		Name: p.GetName(), Image: p.GetImage(), Command: p.GetCommand(), Env: p.GetEnv(), Labels: p.GetLabels(),
		Hostname: p.GetHostname(), Network: p.GetNetwork(), Aliases: p.GetAliases(), ExtraNetworks: p.GetExtraNetworks(),
		Ports: portsFromProto(p.GetPorts()), Devices: p.GetDevices(), StopGrace: wire.DurationFromProto(p.GetStopGrace()),
		RestartPolicy: p.GetRestartPolicy(), HostNetwork: p.GetHostNetwork(),
		Cmd: p.GetCmd(), StopSignal: p.GetStopSignal(),
		Healthcheck: healthcheckFromProto(p.GetHealthcheck()), Options: optionsFromProto(p.GetOptions()), Node: p.GetNode(),
	}
	if p.GetEntrypointSet() {
		out.Entrypoint = append([]string{}, p.GetEntrypoint()...)
	}
	for _, m := range p.GetMounts() {
		out.Mounts = append(out.Mounts, core.Mount{Type: m.GetType(), Source: m.GetSource(), Target: m.GetTarget(), ReadOnly: m.GetReadOnly(), Secret: m.GetSecret(), Config: m.GetConfig()})
	}
	return out
}

func stateToProto(s core.ContainerState) *pb.ContainerState {
	return &pb.ContainerState{
		Id: s.ID, Name: s.Name, Image: s.Image, Status: s.Status, StartedAt: wire.TimeToProto(s.StartedAt),
		Health: s.Health, HasHealthcheck: s.HasHealthcheck, ExitCode: int32(s.ExitCode), Env: s.Env, Labels: s.Labels,
		HealthLog:     s.HealthLog,
		OomKilled:     s.OOMKilled,
		RestartPolicy: s.RestartPolicy, Node: s.Node,
	}
}

func stateFromProto(p *pb.ContainerState) core.ContainerState {
	return core.ContainerState{
		ID: p.GetId(), Name: p.GetName(), Image: p.GetImage(), Status: p.GetStatus(), StartedAt: wire.TimeFromProto(p.GetStartedAt()),
		Health: p.GetHealth(), HasHealthcheck: p.GetHasHealthcheck(), ExitCode: int(p.GetExitCode()), Env: p.GetEnv(), Labels: p.GetLabels(),
		HealthLog:     p.GetHealthLog(),
		OOMKilled:     p.GetOomKilled(),
		RestartPolicy: p.GetRestartPolicy(), Node: p.GetNode(),
	}
}

func bindsToProto(bs []core.BackendBind) []*pb.BackendBind {
	out := make([]*pb.BackendBind, len(bs))
	for i, b := range bs {
		out[i] = &pb.BackendBind{ContainerPort: int32(b.ContainerPort), HostPort: int32(b.HostPort), Protocol: b.Protocol, Ip: b.IP, Network: b.Network}
	}
	return out
}

func bindsFromProto(bs []*pb.BackendBind) []core.BackendBind {
	if len(bs) == 0 {
		return nil
	}
	out := make([]core.BackendBind, len(bs))
	for i, b := range bs {
		out[i] = core.BackendBind{ContainerPort: int(b.GetContainerPort()), HostPort: int(b.GetHostPort()), Protocol: b.GetProtocol(), IP: b.GetIp(), Network: b.GetNetwork()}
	}
	return out
}

func logOptionsToProto(id string, o core.LogOptions) *pb.LogsRequest {
	return &pb.LogsRequest{Id: id, Since: wire.TimeToProto(o.Since), Tail: int32(o.Tail), Follow: o.Follow}
}

func logOptionsFromProto(p *pb.LogsRequest) core.LogOptions {
	return core.LogOptions{Since: wire.TimeFromProto(p.GetSince()), Tail: int(p.GetTail()), Follow: p.GetFollow()}
}

func lineToProto(l core.LogLine) *pb.LogLine {
	return &pb.LogLine{Time: wire.TimeToProto(l.Time), Stream: l.Stream, Text: l.Text}
}

func lineFromProto(p *pb.LogLine) core.LogLine {
	return core.LogLine{Time: wire.TimeFromProto(p.GetTime()), Stream: p.GetStream(), Text: p.GetText()}
}

func healthcheckToProto(h *core.Healthcheck) *pb.Healthcheck {
	if h == nil {
		return nil
	}
	return &pb.Healthcheck{
		Test: h.Test, Interval: wire.DurationToProto(time.Duration(h.Interval)), Timeout: wire.DurationToProto(time.Duration(h.Timeout)),
		StartPeriod: wire.DurationToProto(time.Duration(h.StartPeriod)), Retries: int32(h.Retries), Disable: h.Disable,
	}
}

func healthcheckFromProto(p *pb.Healthcheck) *core.Healthcheck {
	if p == nil {
		return nil
	}
	return &core.Healthcheck{
		Test: p.GetTest(), Interval: core.Duration(wire.DurationFromProto(p.GetInterval())), Timeout: core.Duration(wire.DurationFromProto(p.GetTimeout())),
		StartPeriod: core.Duration(wire.DurationFromProto(p.GetStartPeriod())), Retries: int(p.GetRetries()), Disable: p.GetDisable(),
	}
}

func optionsToProto(o core.ContainerOptions) *pb.ContainerOptions {
	out := &pb.ContainerOptions{
		User: o.User, WorkingDir: o.WorkingDir, Init: o.Init, ReadOnly: o.ReadOnly, ShmSize: o.ShmSize,
		CapAdd: o.CapAdd, CapDrop: o.CapDrop, Sysctls: o.Sysctls, ExtraHosts: o.ExtraHosts,
		Memory: o.Resources.Memory, Cpus: o.Resources.CPUs, Pids: o.Resources.Pids,
	}
	for _, t := range o.Tmpfs {
		out.Tmpfs = append(out.Tmpfs, &pb.TmpfsMount{Path: t.Path, Options: t.Options})
	}
	for _, u := range o.Ulimits {
		out.Ulimits = append(out.Ulimits, &pb.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	if o.Logging != nil {
		out.LoggingSet, out.LogDriver, out.LogOptions = true, o.Logging.Driver, o.Logging.Options
	}
	return out
}

func optionsFromProto(p *pb.ContainerOptions) core.ContainerOptions {
	if p == nil {
		return core.ContainerOptions{}
	}
	out := core.ContainerOptions{
		User: p.GetUser(), WorkingDir: p.GetWorkingDir(), Init: p.GetInit(), ReadOnly: p.GetReadOnly(), ShmSize: p.GetShmSize(),
		CapAdd: p.GetCapAdd(), CapDrop: p.GetCapDrop(), Sysctls: p.GetSysctls(), ExtraHosts: p.GetExtraHosts(),
		Resources: core.Resources{Memory: p.GetMemory(), CPUs: p.GetCpus(), Pids: p.GetPids()},
	}
	for _, t := range p.GetTmpfs() {
		out.Tmpfs = append(out.Tmpfs, core.TmpfsMount{Path: t.GetPath(), Options: t.GetOptions()})
	}
	for _, u := range p.GetUlimits() {
		out.Ulimits = append(out.Ulimits, core.Ulimit{Name: u.GetName(), Soft: u.GetSoft(), Hard: u.GetHard()})
	}
	if p.GetLoggingSet() {
		out.Logging = &core.Logging{Driver: p.GetLogDriver(), Options: p.GetLogOptions()}
	}
	return out
}
