package core

import (
	"context"
	"errors"
	"time"
)

// DefaultReadinessTimeout is the readiness budget when none is declared (R35).
const DefaultReadinessTimeout = 30 * time.Second

// DeployReadiness returns the deploy-time probe of s (SPEC R29): the
// declared check when its type is http, tcp, log or plugin; otherwise the
// implicit HTTP probe on "/" or the implicit TCP probe, else type "none".
// Port is resolved per R30 (0 when nothing can be probed); Path defaults to
// "/" for http; Timeout to 30 s.
func DeployReadiness(s *ServiceSpec) Readiness {
	// Filled in by the readiness work (R29/R30); see readiness_test.go.
	r := s.Readiness
	if r.Timeout == 0 {
		r.Timeout = Duration(DefaultReadinessTimeout)
	}
	return r
}

// DeclaredReadiness returns the check used to verify a running generation
// (start, boot, periodic pass): the declared check only (R29 last line).
func DeclaredReadiness(s *ServiceSpec) Readiness {
	r := s.Readiness
	if r.Timeout == 0 {
		r.Timeout = Duration(DefaultReadinessTimeout)
	}
	return r
}

// ProbeTargetFor builds the probe target for r on a container (R30): the
// address is 127.0.0.1:<host port> of r.Port's bind. A missing bind is an
// error wrapping ErrInvalid.
func ProbeTargetFor(app string, s *ServiceSpec, r Readiness, containerID string, startedAt time.Time, binds []BackendBind) (ProbeTarget, error) {
	return ProbeTarget{}, errors.New("not implemented")
}

// ReadinessWaiter runs readiness checks under a budget (R31–R35): it owns
// the retry interval and the budget; each Prober.Check is one attempt.
type ReadinessWaiter struct {
	Probes ProbeSet
}

// WaitResult reports how a wait went.
type WaitResult struct {
	Attempts   int
	LastDetail string
	Elapsed    time.Duration
}

// Wait probes target with r until ready, the budget (r.Timeout) runs out,
// or ctx ends. Type "none" returns at once. Errors: the budget's timeout
// error (R31 names the URL and last attempt; R33 starts with "TCP readiness
// timeout"), or ctx's error when the caller cancelled (R33, S42).
// progress, if non-nil, is called after every failed attempt.
func (w *ReadinessWaiter) Wait(ctx context.Context, target ProbeTarget, r Readiness, progress func(WaitResult)) (WaitResult, error) {
	return WaitResult{}, errors.New("not implemented")
}
