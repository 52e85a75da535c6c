package engine

import "github.com/gordon-deploy/docker-gordon/core"

// OpView is an operation as `ops --format json` shows it, in the list and
// in the detail alike: the journal's record with Verb always set (the
// verb that ran it, "scale" or "rollback" for those deploys) and each
// step's phase times in integer milliseconds (phases_ms, as the webhook
// documents give them) instead of duration strings.
type OpView struct {
	core.Operation
	Steps []StepView `json:"steps"`
}

// StepView is a journal step with its phases in milliseconds.
type StepView struct {
	core.Step
	// Phases hides the step's duration strings (always nil here).
	Phases   map[string]core.Duration `json:"phases,omitempty"`
	PhasesMS map[string]int64         `json:"phases_ms,omitempty"`
}

// OpViewOf is op as OpView.
func OpViewOf(op core.Operation) OpView {
	op.Verb = op.VerbOrKind()
	v := OpView{Operation: op, Steps: make([]StepView, 0, len(op.Steps))}
	for _, s := range op.Steps {
		sv := StepView{Step: s}
		if len(s.Phases) > 0 {
			sv.PhasesMS = make(map[string]int64, len(s.Phases))
			for k, d := range s.Phases {
				sv.PhasesMS[k] = d.D().Milliseconds()
			}
		}
		v.Steps = append(v.Steps, sv)
	}
	return v
}

// OpViews is OpViewOf of each op, in order.
func OpViews(ops []core.Operation) []OpView {
	out := make([]OpView, 0, len(ops))
	for _, op := range ops {
		out = append(out, OpViewOf(op))
	}
	return out
}
