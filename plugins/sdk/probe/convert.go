package probe

import (
	"encoding/json"
	"fmt"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/plugins/sdk/internal/wire"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Conversions between core probe types and their proto messages.
// Readiness.Config travels as a JSON object; empty bytes mean nil.

func probeInfoToProto(i core.ProbeInfo) *pb.ProbeInfo {
	return &pb.ProbeInfo{Name: i.Name, Protocol: int32(i.Protocol), ConfigSchema: i.ConfigSchema, Version: i.Version}
}

func probeInfoFromProto(p *pb.ProbeInfo) core.ProbeInfo {
	return core.ProbeInfo{Name: p.GetName(), Protocol: int(p.GetProtocol()), ConfigSchema: p.GetConfigSchema(), Version: p.GetVersion()}
}

func httpToProto(hs []core.HTTPInterface) []*pb.HTTPInterface {
	var out []*pb.HTTPInterface
	for _, h := range hs {
		out = append(out, &pb.HTTPInterface{Port: int32(h.Port), Host: h.Host, Visibility: h.Visibility})
	}
	return out
}

func httpFromProto(hs []*pb.HTTPInterface) []core.HTTPInterface {
	var out []core.HTTPInterface
	for _, h := range hs {
		out = append(out, core.HTTPInterface{Port: int(h.GetPort()), Host: h.GetHost(), Visibility: h.GetVisibility()})
	}
	return out
}

func l4ToProto(ls []core.L4Interface) []*pb.L4Interface {
	var out []*pb.L4Interface
	for _, l := range ls {
		out = append(out, &pb.L4Interface{Port: int32(l.Port), Publish: l.Publish})
	}
	return out
}

func l4FromProto(ls []*pb.L4Interface) []core.L4Interface {
	var out []core.L4Interface
	for _, l := range ls {
		out = append(out, core.L4Interface{Port: int(l.GetPort()), Publish: l.GetPublish()})
	}
	return out
}

func targetToProto(t core.ProbeTarget) *pb.ProbeTarget {
	return &pb.ProbeTarget{
		App: t.App, Service: t.Service, ContainerId: t.ContainerID, Address: t.Address, Port: int32(t.Port),
		StartedAt: wire.TimeToProto(t.StartedAt), Host: t.Host,
		Http: httpToProto(t.HTTP), Tcp: l4ToProto(t.TCP), Udp: l4ToProto(t.UDP),
	}
}

func targetFromProto(p *pb.ProbeTarget) core.ProbeTarget {
	return core.ProbeTarget{
		App: p.GetApp(), Service: p.GetService(), ContainerID: p.GetContainerId(), Address: p.GetAddress(), Port: int(p.GetPort()),
		StartedAt: wire.TimeFromProto(p.GetStartedAt()), Host: p.GetHost(),
		HTTP: httpFromProto(p.GetHttp()), TCP: l4FromProto(p.GetTcp()), UDP: l4FromProto(p.GetUdp()),
	}
}

func readinessToProto(r core.Readiness) (*pb.Readiness, error) {
	out := &pb.Readiness{
		Type: r.Type, Path: r.Path, Port: int32(r.Port), Host: r.Host, Pattern: r.Pattern, Plugin: r.Plugin,
		Timeout: wire.DurationToProto(r.Timeout.D()),
	}
	if r.Config != nil {
		b, err := json.Marshal(r.Config)
		if err != nil {
			return nil, fmt.Errorf("%w: readiness config is not JSON: %w", core.ErrInvalid, err)
		}
		out.ConfigJson = b
	}
	return out, nil
}

func readinessFromProto(p *pb.Readiness) (core.Readiness, error) {
	out := core.Readiness{
		Type: p.GetType(), Path: p.GetPath(), Port: int(p.GetPort()), Host: p.GetHost(), Pattern: p.GetPattern(), Plugin: p.GetPlugin(),
		Timeout: core.Duration(wire.DurationFromProto(p.GetTimeout())),
	}
	if len(p.GetConfigJson()) > 0 {
		if err := json.Unmarshal(p.GetConfigJson(), &out.Config); err != nil {
			return core.Readiness{}, fmt.Errorf("%w: readiness config: %w", core.ErrInvalid, err)
		}
	}
	return out, nil
}

func requestToProto(r core.ProbeRequest) (*pb.CheckRequest, error) {
	rd, err := readinessToProto(r.Readiness)
	if err != nil {
		return nil, err
	}
	return &pb.CheckRequest{
		Target: targetToProto(r.Target), Readiness: rd, ConfigJson: []byte(r.Config),
		AttemptTimeout: wire.DurationToProto(r.AttemptTimeout),
	}, nil
}

func requestFromProto(p *pb.CheckRequest) (core.ProbeRequest, error) {
	rd, err := readinessFromProto(p.GetReadiness())
	if err != nil {
		return core.ProbeRequest{}, err
	}
	out := core.ProbeRequest{
		Target: targetFromProto(p.GetTarget()), Readiness: rd,
		AttemptTimeout: wire.DurationFromProto(p.GetAttemptTimeout()),
	}
	if len(p.GetConfigJson()) > 0 {
		out.Config = append([]byte(nil), p.GetConfigJson()...)
	}
	return out, nil
}
