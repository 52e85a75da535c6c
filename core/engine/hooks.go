package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// PhaseHook is the progress phase of a hook run (SPEC R69): its Detail is
// "<hook>: <argv>" when it starts, then "<hook>: <line>" per output line and
// "<hook>: <result>" when it ends.
const PhaseHook Phase = "hook"

// hookTailLines is how many of a hook's last output lines a failed hook
// step keeps as diagnostics (secret values redacted).
const hookTailLines = 20

// Hook environment variables (SPEC R69).
const (
	EnvHookApp              = "GORDON_APP"
	EnvHookService          = "GORDON_SERVICE"
	EnvHookRevision         = "GORDON_REVISION"
	EnvHookPreviousRevision = "GORDON_PREVIOUS_REVISION"
)

// HookStepID is the journal step id of hook name of service:
// "service.<service>.hook.<name>".
func HookStepID(service, name string) string { return ServiceStepID(service, "hook."+name) }

// IsHookStep reports whether a journal step id is a hook's (HookStepID):
// it records a command's run, not a service result.
func IsHookStep(id string) bool { return strings.Contains(id, ".hook.") }

// hooksOf returns the service's hooks (nil when it declares none).
func (s *serviceRun) hooksOf() *core.Hooks {
	if s.pin == nil || s.pin.spec == nil || s.pin.spec.Hooks.Empty() {
		return nil
	}
	return s.pin.spec.Hooks
}

// checkHookRuntime refuses hooks the runtime cannot run: a service that
// declares any needs a core.ContainerExecer runtime (ErrUnavailable).
func (e *Engine) checkHookRuntime(spec *core.ServiceSpec) error {
	if spec.Hooks.Empty() {
		return nil
	}
	if _, ok := e.Runtime.(core.ContainerExecer); !ok {
		return fmt.Errorf("%w: service %s declares hooks, but the container runtime cannot exec commands in containers; remove [services.%s.hooks] or use the docker runtime", core.ErrUnavailable, spec.Name, spec.Name)
	}
	return nil
}

// beforeSwitch is R69's before_switch: run once, in the candidate's ready
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

// afterSwitch is R69's after_switch: run once, in the new primary, after
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
		s.ps.Service, err, shortID(s.after), s.d.app)
	s.d.hookFailures = append(s.d.hookFailures, msg)
	s.warn(core.Warning{Service: s.ps.Service, Detail: "after_switch hook failed: " + err.Error()})
}

// afterSwitchOutcome makes a successful deploy partial when an
// after_switch hook failed, and returns the error that says so (nil when
// none failed).
func (d *deployRun) afterSwitchOutcome() error {
	if len(d.hookFailures) == 0 {
		return nil
	}
	if d.op.Outcome == core.OutcomeSuccess {
		d.op.Outcome = core.OutcomePartial
	}
	return fmt.Errorf("%w: deploy %s: %s", core.ErrConflict, d.app, strings.Join(d.hookFailures, "; "))
}

// hookEnv is the environment a hook gets: its own env, then the R69
// variables (which win).
func (s *serviceRun) hookEnv(cmd core.HookCommand) []string {
	prev := ""
	if s.prev != nil {
		prev = s.prev.EffectiveRevision
	}
	var env []string
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		env = append(env, k+"="+cmd.Env[k])
	}
	return append(env,
		EnvHookApp+"="+s.d.app,
		EnvHookService+"="+s.ps.Service,
		EnvHookRevision+"="+s.d.rev.ID,
		EnvHookPreviousRevision+"="+prev)
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

// runHook runs one hook command in container id (R69): journaled as step
// service.<svc>.hook.<name> (pending while it runs, so a crash leaves it
// unfinished and reconciliation fails the op), bounded by the command's
// timeout, its output lines sent to progress. It returns nil when the
// command exited 0, else the cause and the redacted output tail.
func (s *serviceRun) runHook(ctx context.Context, name string, cmd core.HookCommand, id string) (error, []string) {
	d, e := s.d, s.d.e
	stepID := HookStepID(s.ps.Service, name)
	st := s.addStep(stepID)
	st.Before = ""
	st.Detail = fmt.Sprintf("%s: running in %s", name, shortID(id))
	st.StartedAt, st.UpdatedAt = e.now(), e.now()
	d.save(ctx)
	execer, ok := e.Runtime.(core.ContainerExecer)
	if !ok {
		return s.endHook(ctx, stepID, name, id, 0, 0, s.checkErr(), nil)
	}
	s.progress(PhaseHook, name+": "+strings.Join(cmd.Command, " "), 0)
	var mu sync.Mutex
	var tail []string
	out := func(line string) {
		line = dpRedact(line, s.pin.secrets)
		mu.Lock()
		tail = append(tail, line)
		if len(tail) > hookTailLines {
			tail = tail[len(tail)-hookTailLines:]
		}
		mu.Unlock()
		s.progress(PhaseHook, name+": "+line, 0)
	}
	timeout := cmd.EffectiveTimeout()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	t := time.Now()
	code, err := execer.ExecContainer(hctx, id, core.ExecSpec{Cmd: cmd.Command, Env: s.hookEnv(cmd), User: cmd.User,
		WorkingDir: cmd.WorkingDir, Privileged: cmd.Privileged}, out)
	cancel()
	took := time.Since(t)
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("%w: %s hook %q did not exit within its timeout %s; make it faster or raise [services.%s.hooks] timeout",
			core.ErrConflict, name, strings.Join(cmd.Command, " "), timeout, s.ps.Service)
	case err != nil:
		err = fmt.Errorf("%s hook %q: %w", name, strings.Join(cmd.Command, " "), err)
	case code != 0:
		err = fmt.Errorf("%w: %s hook %q exited with status %d", core.ErrConflict, name, strings.Join(cmd.Command, " "), code)
	}
	mu.Lock()
	diags := append([]string(nil), tail...)
	mu.Unlock()
	return s.endHook(ctx, stepID, name, id, code, took, err, diags)
}

// checkErr is checkHookRuntime for the run's service.
func (s *serviceRun) checkErr() error { return s.d.e.checkHookRuntime(s.pin.spec) }

// endHook journals a hook's end on its step: Detail "<name> in <id>: exit
// <code> after <duration>" (or the failure), Phases["hook"] the duration,
// the output tail as diagnostics of a failure; it reports progress and
// returns err with diags.
func (s *serviceRun) endHook(ctx context.Context, stepID, name, id string, code int, took time.Duration, err error, diags []string) (error, []string) {
	st := s.d.op.Step(stepID)
	st.UpdatedAt = s.d.e.now()
	st.Phases = map[string]core.Duration{"hook": core.Duration(took)}
	result := fmt.Sprintf("exit %d after %s", code, took.Round(time.Millisecond))
	if err != nil && code == 0 {
		result = "failed after " + took.Round(time.Millisecond).String()
	}
	st.Detail = fmt.Sprintf("%s in %s: %s", name, shortID(id), result)
	if err != nil {
		st.State, st.Error, st.Diagnostics = core.StepFailed, err.Error(), diags
	} else {
		st.State = core.StepSucceeded
	}
	s.d.save(ctx)
	s.progress(PhaseHook, name+": "+result, 0)
	return err, diags
}
