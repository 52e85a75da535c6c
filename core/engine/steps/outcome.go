package steps

import (
	"sort"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Result is what an operation did to one service (SPEC R9, decision 4);
// it marshals as its string.
type Result string

// Per-service results (SPEC R9, decision 4).
const (
	ResultDeployed  Result = "deployed"
	ResultUnchanged Result = "unchanged"
	ResultFailed    Result = "failed"
	ResultRemoved   Result = "removed"
)

// Flow is the replacement flow a service step took (R14.2); it marshals as
// its string.
type Flow string

// Flows a service step took (R14.2).
const (
	FlowOverlap    Flow = "overlap"
	FlowSequential Flow = "sequential"
	FlowUnchanged  Flow = "unchanged"
	// FlowRunOnce: a one-shot service ran to completion (ServiceSpec.Run).
	FlowRunOnce Flow = "run-once"
	// FlowScale: the serving generation gained or lost instances (R69).
	FlowScale Flow = "scale"
)

// ServiceResult is the outcome of one service in one operation (R14, R17.7).
type ServiceResult struct {
	Service string `json:"service"`
	// Result is deployed, unchanged, failed or removed.
	Result Result `json:"result"`
	// Before is the container ACTIVE named before the op ("" on a first
	// deployment); After the container it names afterwards (the candidate
	// for a failed replacement).
	Before string `json:"before,omitempty"`
	After  string `json:"after,omitempty"`
	// Instances are the containers of every instance serving the service
	// after the op, the primary (After) first, when there are two or more
	// (R69); nil for one instance, a failure or a removal.
	Instances []string `json:"instances,omitempty"`
	// Flow is overlap, sequential or unchanged ("" for removals).
	Flow     Flow           `json:"flow,omitempty"`
	Warnings []core.Warning `json:"warnings,omitempty"`
	// Error is the failure text (never contains logs, R17.6).
	Error string `json:"error,omitempty"`
	// Diagnostics is the redacted failure log tail (R17.6).
	Diagnostics []string `json:"diagnostics,omitempty"`
	// SingleWriter marks a service with volumes or binds (restart_unsafe).
	SingleWriter bool `json:"single_writer,omitempty"`
	// BackendBinds / UDPBackendBinds: container port → the port dialled
	// at IP on Network ("" IP = 127.0.0.1; SPEC R18).
	BackendBinds    map[int]int `json:"backend_binds,omitempty"`
	UDPBackendBinds map[int]int `json:"udp_backend_binds,omitempty"`
	IP              string      `json:"ip,omitempty"`
	Network         string      `json:"network,omitempty"`
	// StartedAt is the verified execution start time (zero if unknown).
	StartedAt time.Time `json:"started_at,omitempty"`
}

// Outcome computes SPEC R9 over per-service results: success when none
// failed (decision 4: unchanged and removed count as success, and an
// empty set is not a failure); partial when one failed and another was
// changed (deployed or removed); failed when one failed and nothing was
// changed, since then the app is exactly as it was. appFailed (an
// app-level failure step: pending.retire, traffic.publish, error) forces
// failed.
func Outcome(results []ServiceResult, appFailed bool) core.Outcome {
	if appFailed {
		return core.OutcomeFailed
	}
	var changed, failed int
	for _, r := range results {
		switch r.Result {
		case ResultDeployed, ResultRemoved:
			changed++
		case ResultFailed:
			failed++
		}
	}
	switch {
	case failed == 0:
		return core.OutcomeSuccess
	case changed > 0:
		return core.OutcomePartial
	default:
		return core.OutcomeFailed
	}
}

// warnings computes SPEC R10: per-service cleanup warnings in service-name
// order, then app-level warnings, each keeping service, leftover and detail.
func Warnings(results []ServiceResult, app []core.Warning) []core.Warning {
	rs := append([]ServiceResult(nil), results...)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Service < rs[j].Service })
	var out []core.Warning
	for _, r := range rs {
		for _, w := range r.Warnings {
			if w.Service == "" {
				w.Service = r.Service
			}
			out = append(out, w)
		}
	}
	return append(out, app...)
}
