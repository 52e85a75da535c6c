package steps

import (
	"github.com/gordon-deploy/docker-gordon/core"
)

// Notification events.
const (
	EventOutcome  = "outcome"
	EventRollback = "rollback"
)

// NotifiedRollback is one automatic rollback (R76) in a [notify] document:
// what the monitor measured over the window and what it restored.
// ErrorRate and MaxErrorRate are shares (0..1); WindowMS is the monitor
// window in milliseconds. Restored says whether RestoredGeneration (the
// previous generation's primary container, at RestoredRevision) serves
// again. DataRestored is always false: a rollback restores code, never
// the data a single-writer service wrote.
type NotifiedRollback struct {
	Automatic          bool    `json:"automatic"`
	Service            string  `json:"service"`
	Flow               string  `json:"flow"`
	Reason             string  `json:"reason"`
	Requests           int64   `json:"requests"`
	Errors             int64   `json:"errors"`
	ErrorRate          float64 `json:"error_rate"`
	MaxErrorRate       float64 `json:"max_error_rate"`
	MinRequests        int64   `json:"min_requests"`
	WindowMS           int64   `json:"window_ms"`
	ReplacedGeneration string  `json:"replaced_generation"`
	RestoredGeneration string  `json:"restored_generation"`
	RestoredRevision   string  `json:"restored_revision,omitempty"`
	Restored           bool    `json:"restored"`
	SingleWriter       bool    `json:"single_writer,omitempty"`
	DataRestored       bool    `json:"data_restored"`
}

// notifiedRollback is rb of service as a document field.
func notifiedRollback(service string, rb core.AutoRollback) NotifiedRollback {
	return NotifiedRollback{Automatic: true, Service: service, Flow: rb.Flow, Reason: rb.Reason,
		Requests: rb.Requests, Errors: rb.Errors, ErrorRate: rb.ErrorRate, MaxErrorRate: rb.MaxErrorRate,
		MinRequests: rb.MinRequests, WindowMS: rb.Window.D().Milliseconds(),
		ReplacedGeneration: rb.Replaced, RestoredGeneration: rb.Restored, RestoredRevision: rb.RestoredRevision,
		Restored: rb.Succeeded, SingleWriter: rb.SingleWriter}
}

// rollbackNotifications are op's event "rollback" documents, one per
// automatic rollback journaled on a monitor step (R76): verb rollback,
// automatic, Op the deploy, Revision the revision rolled back from,
// RollbackTo the restored one, outcome success when the previous
// generation serves again (else failed, with the step's error), from the
// breach to the step's last update.
func rollbackNotifications(op core.Operation) []Notification {
	var out []Notification
	for _, s := range op.Steps {
		if s.Rollback == nil {
			continue
		}
		rb := notifiedRollback(s.Service, *s.Rollback)
		n := Notification{Schema: 1, Event: EventRollback, App: op.App, Op: op.ID, Verb: string(core.VerbRollback), Automatic: true,
			Revision: op.Revision, RollbackTo: rb.RestoredRevision, Outcome: core.OutcomeSuccess,
			StartedAt: s.Rollback.At, FinishedAt: s.UpdatedAt, Rollback: &rb,
			Services: []NotifiedService{{Service: s.Service, State: s.State, Result: s.Result, Error: s.Error}}}
		if !rb.Restored {
			n.Outcome, n.Error = core.OutcomeFailed, s.Error
		}
		if s.UpdatedAt.After(s.Rollback.At) {
			n.DurationMS = s.UpdatedAt.Sub(s.Rollback.At).Milliseconds()
		}
		out = append(out, n)
	}
	return out
}
