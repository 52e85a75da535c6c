package deploy

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"

	"github.com/gordon-deploy/docker-gordon/core"
)

// hooksOf returns the service's hooks (nil when it declares none).
func (s *serviceRun) hooksOf() *core.Hooks {
	if s.pin == nil || s.pin.spec == nil || s.pin.spec.Hooks.Empty() {
		return nil
	}
	return s.pin.spec.Hooks
}

// beforeSwitch is R72's before_switch: run once, in the candidate's ready
// primary, before anything routes to it. A failure is returned with the
// hook's output tail; the caller removes the candidate and fails the step
// (R24), so the old generation (overlap) keeps serving.
func (s *serviceRun) beforeSwitch(ctx context.Context) (error, []string) {
	h := s.hooksOf()
	if h == nil || h.BeforeSwitch == nil {
		return nil, nil
	}
	return s.runHook(ctx, core.HookBeforeSwitch, *h.BeforeSwitch, s.after)
}

// failCandidate removes the ready candidate (every instance) whose
// before_switch hook failed (R24) and fails the step with the hook's
// cause. The hook's output tail stays on the hook step (the service
// result's diagnostics are the candidate's own log lines, R17.6).
func (s *serviceRun) failCandidate(ctx context.Context, err error, _ []string) error {
	s.dropCandidate(ctx, s.after)
	for _, r := range s.replicas {
		s.dropInstance(ctx, r)
	}
	return s.fail(ctx, err, nil)
}

// afterSwitch is R72's after_switch: run once, in the new primary, after
// the switch. A failure never undoes the switch: it is journaled on its
// step, becomes a warning and makes the deploy's outcome partial (see
// afterSwitchOutcome); it is the point an automatic rollback (monitor)
// would start from.
func (s *serviceRun) afterSwitch(ctx context.Context) {
	h := s.hooksOf()
	if h == nil || h.AfterSwitch == nil {
		return
	}
	err, _ := s.runHook(ctx, core.HookAfterSwitch, *h.AfterSwitch, s.after)
	if err == nil {
		return
	}
	msg := fmt.Sprintf("service %s: after_switch hook failed: %v (the new generation %s serves; fix the hook's cause by hand or roll back with: docker gordon rollback %s)",
		s.ps.Service, err, readiness.ShortID(s.after), s.d.app)
	s.d.hookFailures = append(s.d.hookFailures, msg)
	s.warn(core.Warning{Service: s.ps.Service, Detail: "after_switch hook failed: " + err.Error()})
}

// afterSwitchOutcome is a finished deploy's outcome: success becomes
// partial when an after_switch hook failed.
func afterSwitchOutcome(o core.Outcome, failures []string) core.Outcome {
	if len(failures) > 0 && o == core.OutcomeSuccess {
		return core.OutcomePartial
	}
	return o
}

// afterSwitchErr is the error a deploy returns when after_switch hooks
// failed (ErrConflict, naming each), nil when none did.
func (d *deployRun) afterSwitchErr() error {
	if len(d.hookFailures) == 0 {
		return nil
	}
	return fmt.Errorf("%w: deploy %s: %s", core.ErrConflict, d.app, strings.Join(d.hookFailures, "; "))
}

// hookEnv is the R72 environment of the run's hooks: the revision being
// deployed and the one the service ran before ("" on a first deploy).
func (s *serviceRun) hookEnv() []string {
	prev := ""
	if s.prev != nil {
		prev = s.prev.EffectiveRevision
	}
	return steps.HookEnvFor(s.d.app, s.ps.Service, s.d.rev.ID, prev)
}

// addStep appends a pending journal step and re-points s.step, which the
// append may have moved.
func (s *serviceRun) addStep(id string) *core.Step {
	cur := s.step.ID
	st := s.d.step(id, s.ps.Service)
	s.step = s.d.op.Step(cur)
	s.timer.step = s.step
	return st
}

// runHook runs one hook command in container id (R72): journaled as step
// service.<svc>.hook.<name> (pending while it runs, so a crash leaves it
// unfinished and reconciliation fails the op), bounded by the command's
// timeout, its output lines sent to progress. It returns nil when the
// command exited 0, else the cause and the redacted output tail.
func (s *serviceRun) runHook(ctx context.Context, name string, cmd core.HookCommand, id string) (error, []string) {
	d, e := s.d, s.d.e
	stepID := steps.HookStepID(s.ps.Service, name)
	st := s.addStep(stepID)
	st.Before = ""
	st.Detail = fmt.Sprintf("%s: running in %s", name, readiness.ShortID(id))
	st.StartedAt, st.UpdatedAt = e.Now(), e.Now()
	d.save(ctx)
	t := time.Now()
	err, diags := e.ExecHook(ctx, d.app, s.ps.Service, name, id, cmd, s.hookEnv(), s.pin.secrets)
	return s.endHook(ctx, stepID, name, id, steps.ExitStatus(err), time.Since(t), err, diags)
}

// endHook journals a hook's end on its step: Detail "<name> in <id>: exit
// <code> after <duration>" (or the failure), Phases["hook"] the duration,
// the output tail as diagnostics of a failure; it reports progress and
// returns err with diags.
func (s *serviceRun) endHook(ctx context.Context, stepID, name, id string, code int, took time.Duration, err error, diags []string) (error, []string) {
	st := s.d.op.Step(stepID)
	st.UpdatedAt = s.d.e.Now()
	st.Phases = map[string]core.Duration{"hook": core.Duration(took)}
	result := fmt.Sprintf("exit %d after %s", code, took.Round(time.Millisecond))
	if err != nil && code == 0 {
		result = "failed after " + took.Round(time.Millisecond).String()
	}
	st.Detail = fmt.Sprintf("%s in %s: %s", name, readiness.ShortID(id), result)
	if err != nil {
		st.State, st.Error, st.Diagnostics = core.StepFailed, err.Error(), diags
	} else {
		st.State = core.StepSucceeded
	}
	s.d.save(ctx)
	s.progress(steps.PhaseHook, name+": "+result, 0)
	return err, diags
}

// postStart runs the service's post_start hooks (compose post_start, R72)
// in one just-started instance, in order; the first failure is returned
// (naming the instance) with that hook's output tail.
func (s *serviceRun) postStart(ctx context.Context, id, what string) (error, []string) {
	h := s.hooksOf()
	if h == nil {
		return nil, nil
	}
	env := s.hookEnv()
	for _, cmd := range h.PostStart {
		if err, diags := s.d.e.ExecHook(ctx, s.d.app, s.ps.Service, core.HookPostStart, id, cmd, env, s.pin.secrets); err != nil {
			return fmt.Errorf("start container %s: %w", what, err), diags
		}
	}
	return nil, nil
}

// afterStart is R17.5 preceded by R72's post_start: the service's
// post_start hooks run in the started instance (their time is the step's
// post_start phase, through done; a failure's output tail becomes r.diags),
// then its binds are read and its claims registered.
func (s *serviceRun) afterStart(ctx context.Context, r *instanceRun, what string, done func(string, time.Time)) error {
	if h := s.hooksOf(); h != nil && len(h.PostStart) > 0 {
		t := time.Now()
		err, diags := s.postStart(ctx, r.id, what)
		done(core.HookPostStart, t)
		if err != nil {
			r.diags = diags
			return err
		}
	}
	return s.instanceBinds(ctx, r)
}
