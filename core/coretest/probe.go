package coretest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Prober is a programmable fake core.Prober. Each Check records its request
// and answers, in order of precedence: CheckFn; a result scripted for the
// container ID or the address (SetResult/Script); Default (ready). A ready
// answer appends "ready" (ID = container) to Events, anything else
// "probe-failed" (Detail = the detail or error).
type Prober struct {
	// Name is what Describe reports (default "fake").
	Name string
	// CheckFn, if set, answers every Check.
	CheckFn func(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error)
	// Default answers unscripted checks; the zero value of the field is
	// replaced by {Ready: true} in NewProber.
	Default core.ProbeResult

	ev      *Events
	mu      sync.Mutex
	scripts map[string][]probeAnswer
	reqs    []core.ProbeRequest
}

type probeAnswer struct {
	res core.ProbeResult
	err error
}

var _ core.Prober = (*Prober)(nil)

// NewProber returns a prober that answers ready unless scripted.
func NewProber(ev *Events) *Prober {
	return &Prober{Name: "fake", Default: core.ProbeResult{Ready: true}, ev: ev, scripts: map[string][]probeAnswer{}}
}

// SetResult makes every check of key (container ID or "127.0.0.1:port")
// answer ready/detail.
func (p *Prober) SetResult(key string, ready bool, detail string) {
	p.Script(key, core.ProbeResult{Ready: ready, Detail: detail}, nil)
}

// Script queues answers for key: each check consumes one; the last repeats.
// A non-nil err is returned as the backend error with the result.
func (p *Prober) Script(key string, res core.ProbeResult, err error, more ...core.ProbeResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	as := []probeAnswer{{res: res, err: err}}
	for _, m := range more {
		as = append(as, probeAnswer{res: m})
	}
	p.scripts[key] = as
}

// Requests returns every request received, in order.
func (p *Prober) Requests() []core.ProbeRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]core.ProbeRequest(nil), p.reqs...)
}

// Addresses returns the target address of every request, in order.
func (p *Prober) Addresses() []string {
	var out []string
	for _, r := range p.Requests() {
		out = append(out, r.Target.Address)
	}
	return out
}

// Describe implements core.Prober.
func (p *Prober) Describe(ctx context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: p.Name, Protocol: 1}, nil
}

// ValidateConfig implements core.Prober: everything is valid.
func (p *Prober) ValidateConfig(ctx context.Context, config json.RawMessage) ([]string, error) {
	return nil, nil
}

// Check implements core.Prober.
func (p *Prober) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	fn := p.CheckFn
	var ans *probeAnswer
	for _, key := range []string{req.Target.ContainerID, req.Target.Address} {
		if as := p.scripts[key]; key != "" && len(as) > 0 {
			a := as[0]
			if len(as) > 1 {
				p.scripts[key] = as[1:]
			}
			ans = &a
			break
		}
	}
	def := p.Default
	p.mu.Unlock()
	var res core.ProbeResult
	var err error
	switch {
	case fn != nil:
		res, err = fn(ctx, req)
	case ans != nil:
		res, err = ans.res, ans.err
	default:
		res = def
	}
	id := req.Target.ContainerID
	switch {
	case err != nil:
		p.ev.AddDetail("probe-failed", id, err.Error())
	case res.Ready:
		p.ev.AddDetail("ready", id, req.Target.Address)
	default:
		p.ev.AddDetail("probe-failed", id, res.Detail)
	}
	return res, err
}

// ProbeSet is a fake core.ProbeSet: every kind resolves to Default unless
// Set overrides it; Unknown kinds listed in Missing return ErrNotFound. It
// records every kind asked for.
type ProbeSet struct {
	Default *Prober
	mu      sync.Mutex
	byKind  map[string]core.Prober
	missing map[string]bool
	asked   []string
}

var _ core.ProbeSet = (*ProbeSet)(nil)

// NewProbeSet returns a set whose every kind is served by p.
func NewProbeSet(p *Prober) *ProbeSet {
	return &ProbeSet{Default: p, byKind: map[string]core.Prober{}, missing: map[string]bool{}}
}

// Set serves kind (or plugin name for kind "plugin") with p.
func (s *ProbeSet) Set(kind string, p core.Prober) {
	s.mu.Lock()
	s.byKind[kind] = p
	s.mu.Unlock()
}

// Remove makes kind unknown (ErrNotFound).
func (s *ProbeSet) Remove(kind string) {
	s.mu.Lock()
	s.missing[kind] = true
	s.mu.Unlock()
}

// Asked returns the kinds asked for, in order ("plugin:<name>" for plugins).
func (s *ProbeSet) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

// Prober implements core.ProbeSet.
func (s *ProbeSet) Prober(ctx context.Context, kind, plugin string) (core.Prober, error) {
	key := kind
	if kind == core.ReadinessPlugin {
		key = "plugin:" + plugin
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, key)
	if s.missing[key] {
		return nil, fmt.Errorf("probe %q: %w", key, core.ErrNotFound)
	}
	if p, ok := s.byKind[key]; ok {
		return p, nil
	}
	if p, ok := s.byKind[kind]; ok {
		return p, nil
	}
	return s.Default, nil
}
