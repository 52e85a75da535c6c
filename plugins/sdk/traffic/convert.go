package traffic

import (
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	pb "github.com/gordon-deploy/docker-gordon/plugins/sdk/proto"
)

// Conversions between the route graph / traffic status and their protos.

func l4ToProto(rs []routetable.L4Route) []*pb.L4Route {
	var out []*pb.L4Route
	for _, r := range rs {
		pr := &pb.L4Route{Listen: r.Listen, App: r.App, Service: r.Service, Backend: r.Backend, Container: r.Container, Hold: holdToProto(r.Hold),
			IdleTimeoutMs: r.IdleTimeoutMS, MaxConns: int32(r.MaxConns), Asleep: asleepToProto(r.Asleep)}
		for _, b := range r.Backends {
			pr.Backends = append(pr.Backends, &pb.Backend{Addr: b.Addr, Container: b.Container})
		}
		out = append(out, pr)
	}
	return out
}

func l4FromProto(rs []*pb.L4Route) []routetable.L4Route {
	var out []routetable.L4Route
	for _, r := range rs {
		lr := routetable.L4Route{Listen: r.GetListen(), App: r.GetApp(), Service: r.GetService(), Backend: r.GetBackend(), Container: r.GetContainer(), Hold: holdFromProto(r.GetHold()),
			IdleTimeoutMS: r.GetIdleTimeoutMs(), MaxConns: int(r.GetMaxConns()), Asleep: asleepFromProto(r.GetAsleep())}
		for _, b := range r.GetBackends() {
			lr.Backends = append(lr.Backends, routetable.Backend{Addr: b.GetAddr(), Container: b.GetContainer()})
		}
		out = append(out, lr)
	}
	return out
}

func holdToProto(h *routetable.Hold) *pb.Hold {
	if h == nil {
		return nil
	}
	return &pb.Hold{UntilUnixMs: h.Until.UnixMilli(), Queue: int32(h.Queue)}
}

func holdFromProto(h *pb.Hold) *routetable.Hold {
	if h == nil {
		return nil
	}
	return &routetable.Hold{Until: time.UnixMilli(h.GetUntilUnixMs()).UTC(), Queue: int(h.GetQueue())}
}

func asleepToProto(a *routetable.Asleep) *pb.Asleep {
	if a == nil {
		return nil
	}
	return &pb.Asleep{WakeTimeoutMs: a.WakeTimeoutMS, Ignore: a.Ignore}
}

func asleepFromProto(a *pb.Asleep) *routetable.Asleep {
	if a == nil {
		return nil
	}
	return &routetable.Asleep{WakeTimeoutMS: a.GetWakeTimeoutMs(), Ignore: a.GetIgnore()}
}

func graphToProto(g routetable.Graph) *pb.Graph {
	out := &pb.Graph{Tcp: l4ToProto(g.TCP), Udp: l4ToProto(g.UDP)}
	for _, h := range g.HTTP {
		r := &pb.HTTPRoute{Host: h.Host, App: h.App, Service: h.Service, Hold: holdToProto(h.Hold), Stopped: h.Stopped, Unavailable: h.Unavailable, ResponseHeaderTimeoutMs: h.ResponseHeaderTimeoutMS, Tls: h.TLS, Protocol: h.Protocol, Hsts: h.HSTS, BasicAuth: h.BasicAuth, Allow: h.Allow, Asleep: asleepToProto(h.Asleep)}
		if m := h.Maintenance; m != nil {
			r.Maintenance = &pb.Maintenance{Message: m.Message, Allow: m.Allow}
		}
		for _, b := range h.Backends {
			r.Backends = append(r.Backends, &pb.Backend{Addr: b.Addr, Container: b.Container})
		}
		out.Http = append(out.Http, r)
	}
	return out
}

func graphFromProto(p *pb.Graph) routetable.Graph {
	out := routetable.Graph{TCP: l4FromProto(p.GetTcp()), UDP: l4FromProto(p.GetUdp())}
	for _, h := range p.GetHttp() {
		r := routetable.HTTPRoute{Host: h.GetHost(), App: h.GetApp(), Service: h.GetService(), Hold: holdFromProto(h.GetHold()), Stopped: h.GetStopped(), Unavailable: h.GetUnavailable(), ResponseHeaderTimeoutMS: h.GetResponseHeaderTimeoutMs(), TLS: h.GetTls(), Protocol: h.GetProtocol(), HSTS: h.GetHsts(), BasicAuth: h.GetBasicAuth(), Allow: h.GetAllow(), Asleep: asleepFromProto(h.GetAsleep())}
		if m := h.GetMaintenance(); m != nil {
			r.Maintenance = &routetable.Maintenance{Message: m.GetMessage(), Allow: m.GetAllow()}
		}
		for _, b := range h.GetBackends() {
			r.Backends = append(r.Backends, routetable.Backend{Addr: b.GetAddr(), Container: b.GetContainer()})
		}
		out.HTTP = append(out.HTTP, r)
	}
	return out
}

func statusToProto(s core.TrafficStatus) *pb.TrafficStatus {
	out := &pb.TrafficStatus{AppliedGeneration: s.AppliedGeneration, Error: s.Error, Stale: s.Stale, RetiredBackends: s.RetiredBackends}
	if !s.UpdatedAt.IsZero() {
		out.UpdatedAtUnixMs = s.UpdatedAt.UnixMilli()
	}
	for _, b := range s.Backends {
		pbs := &pb.BackendStatus{Addr: b.Addr, InFlight: b.InFlight, OpenConns: b.OpenConns, EjectReason: b.EjectReason,
			Requests: b.Requests, Errors: b.Errors}
		if !b.EjectedUntil.IsZero() {
			pbs.EjectedUntilUnixMs = b.EjectedUntil.UnixMilli()
		}
		out.Backends = append(out.Backends, pbs)
	}
	for _, l := range s.Listeners {
		out.Listeners = append(out.Listeners, &pb.ListenerStatus{Addr: l.Addr, Proto: l.Proto, Error: l.Error})
	}
	return out
}

func statusFromProto(p *pb.TrafficStatus) core.TrafficStatus {
	out := core.TrafficStatus{AppliedGeneration: p.GetAppliedGeneration(), Error: p.GetError(), Stale: p.GetStale(), RetiredBackends: p.GetRetiredBackends()}
	if ms := p.GetUpdatedAtUnixMs(); ms != 0 {
		out.UpdatedAt = time.UnixMilli(ms).UTC()
	}
	for _, b := range p.GetBackends() {
		bs := routetable.BackendStatus{Addr: b.GetAddr(), InFlight: b.GetInFlight(), OpenConns: b.GetOpenConns(), EjectReason: b.GetEjectReason(),
			Requests: b.GetRequests(), Errors: b.GetErrors()}
		if ms := b.GetEjectedUntilUnixMs(); ms != 0 {
			bs.EjectedUntil = time.UnixMilli(ms).UTC()
		}
		out.Backends = append(out.Backends, bs)
	}
	for _, l := range p.GetListeners() {
		out.Listeners = append(out.Listeners, routetable.ListenerStatus{Addr: l.GetAddr(), Proto: l.GetProto(), Error: l.GetError()})
	}
	return out
}

func certToProto(c core.CertInfo) *pb.CertInfo {
	out := &pb.CertInfo{Host: c.Host, Source: c.Source, Issuer: c.Issuer, State: c.State, Error: c.Error}
	if !c.NotAfter.IsZero() {
		out.NotAfterUnix = c.NotAfter.Unix()
	}
	if !c.RetryAt.IsZero() {
		out.RetryAtUnix = c.RetryAt.Unix()
	}
	return out
}

func certFromProto(p *pb.CertInfo) core.CertInfo {
	out := core.CertInfo{Host: p.GetHost(), Source: p.GetSource(), Issuer: p.GetIssuer(), State: p.GetState(), Error: p.GetError()}
	if p.GetNotAfterUnix() != 0 {
		out.NotAfter = time.Unix(p.GetNotAfterUnix(), 0).UTC()
	}
	if p.GetRetryAtUnix() != 0 {
		out.RetryAt = time.Unix(p.GetRetryAtUnix(), 0).UTC()
	}
	return out
}
