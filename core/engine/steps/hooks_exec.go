package steps

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Hook environment variables (SPEC R72).
const (
	EnvHookApp              = "GORDON_APP"
	EnvHookService          = "GORDON_SERVICE"
	EnvHookRevision         = "GORDON_REVISION"
	EnvHookPreviousRevision = "GORDON_PREVIOUS_REVISION"
)

// PhaseHook is the progress phase of a hook run (SPEC R72): its Detail is
// "<hook>: <argv>" when it starts, then "<hook>: <line>" per output line and
// "<hook>: <result>" when it ends.
const PhaseHook Phase = "hook"

// hookTailLines is how many of a hook's last output lines a failed hook
// step keeps as diagnostics (secret values redacted).
const hookTailLines = 20

// HookStepID is the journal step id of hook name of service:
// "service.<service>.hook.<name>".
func HookStepID(service, name string) string { return ServiceStepID(service, "hook."+name) }

// IsHookStep reports whether a journal step id is a hook's (HookStepID):
// it records a command's run, not a service result.
// Service names are DNS labels (no dots), so a service named "hook" is not
// mistaken for one.
func IsHookStep(id string) bool {
	parts := strings.Split(id, ".")
	return len(parts) == 4 && parts[0] == "service" && parts[2] == "hook"
}

// SnapshotStepID and RestoreStepID are the journal step ids of the
// snapshot of a service's volumes before a replacement and of the restore
// of one ("service.<service>.snapshot", "service.<service>.restore").
func SnapshotStepID(service string) string { return ServiceStepID(service, "snapshot") }
func RestoreStepID(service string) string  { return ServiceStepID(service, "restore") }

// IsSubStep reports whether a journal step records part of a service's
// step (a hook's run, a snapshot or a restore of its volumes), not a
// service result.
func IsSubStep(id string) bool {
	if IsHookStep(id) {
		return true
	}
	parts := strings.Split(id, ".")
	return len(parts) == 3 && parts[0] == "service" && (parts[2] == "snapshot" || parts[2] == "restore")
}

// checkHookRuntime refuses hooks the runtime cannot run: a service that
// declares any needs a core.ContainerExecer runtime (ErrUnavailable).
func (e *Engine) CheckHookRuntime(spec *core.ServiceSpec) error {
	if spec.Hooks.Empty() {
		return nil
	}
	if _, ok := e.Runtime.(core.ContainerExecer); !ok {
		return fmt.Errorf("%w: service %s declares hooks, but the container runtime cannot exec commands in containers; remove [services.%s.hooks] or use the docker runtime", core.ErrUnavailable, spec.Name, spec.Name)
	}
	return nil
}

// hookEnvFor is the R72 environment of a hook of app's service: the
// revision the container runs and the one before it ("" when unknown).
func HookEnvFor(app, service, rev, prev string) []string {
	return []string{EnvHookApp + "=" + app, EnvHookService + "=" + service, EnvHookRevision + "=" + rev, EnvHookPreviousRevision + "=" + prev}
}

// withEnv is cmd's own env (sorted) followed by base.
func withEnv(cmd core.HookCommand, base []string) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		env = append(env, k+"="+cmd.Env[k])
	}
	return append(env, base...)
}

// execHook runs cmd in container id within its timeout and returns the
// failure (nil on exit 0) and the last hookTailLines output lines, each
// redacted; every line also goes to progress as "<name>: <line>".
func (e *Engine) ExecHook(ctx context.Context, app, service, name, id string, cmd core.HookCommand, env, secrets []string) (error, []string) {
	ex, ok := e.Runtime.(core.ContainerExecer)
	if !ok {
		return fmt.Errorf("%w: %s hook: the container runtime cannot exec commands in containers", core.ErrUnavailable, name), nil
	}
	argv := strings.Join(cmd.Command, " ")
	report := func(detail string) {
		e.Emit(ProgressEvent{App: app, Service: service, Phase: PhaseHook, Detail: name + ": " + detail})
	}
	report(argv + " in " + readiness.ShortID(id))
	var mu sync.Mutex
	var tail []string
	timeout := cmd.EffectiveTimeout()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	code, err := ex.ExecContainer(hctx, id, core.ExecSpec{Cmd: cmd.Command, Env: withEnv(cmd, env), User: cmd.User,
		WorkingDir: cmd.WorkingDir, Privileged: cmd.Privileged}, func(line string) {
		line = DpRedact(line, secrets)
		mu.Lock()
		tail = append(tail, line)
		if len(tail) > hookTailLines {
			tail = tail[len(tail)-hookTailLines:]
		}
		mu.Unlock()
		report(line)
	})
	switch {
	case err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded):
		err = fmt.Errorf("%w: %s hook %q in %s did not exit within its timeout %s; make it faster or raise [services.%s.hooks] timeout",
			core.ErrConflict, name, argv, readiness.ShortID(id), timeout, service)
	case err != nil:
		err = fmt.Errorf("%s hook %q in %s: %w", name, argv, readiness.ShortID(id), err)
	case code != 0:
		err = &hookExit{name: name, argv: argv, id: readiness.ShortID(id), code: code}
	}
	mu.Lock()
	defer mu.Unlock()
	return err, append([]string(nil), tail...)
}

// preStop runs o.PreStop in container before its stop signal (compose
// pre_stop, R72), best effort: a failure or timeout is a warning and the
// stop goes on.
func (e *Engine) PreStop(ctx context.Context, app, container string, o RetireOptions) []core.Warning {
	var ws []core.Warning
	for _, cmd := range o.PreStop {
		if err, _ := e.ExecHook(ctx, app, o.Service, core.HookPreStop, container, cmd, o.HookEnv, nil); err != nil {
			ws = append(ws, core.Warning{Service: o.Service, Detail: "pre_stop hook failed (stopped anyway): " + err.Error()})
		}
	}
	return ws
}

// preStopOf is the retire options' pre_stop part for a generation of
// app's service running spec at revision rev.
func PreStopOf(app string, a *core.ActiveService) RetireOptions {
	if a == nil || a.Spec.Hooks.Empty() || len(a.Spec.Hooks.PreStop) == 0 {
		return RetireOptions{}
	}
	return RetireOptions{PreStop: a.Spec.Hooks.PreStop, HookEnv: HookEnvFor(app, a.Spec.Name, a.EffectiveRevision, "")}
}

// hookExit is a hook that ran and exited non-zero (wraps ErrConflict).
type hookExit struct {
	name, argv, id string
	code           int
}

func (h *hookExit) Error() string {
	return fmt.Sprintf("%s: %s hook %q in %s exited with status %d", core.ErrConflict, h.name, h.argv, h.id, h.code)
}

func (h *hookExit) Unwrap() error { return core.ErrConflict }

// exitStatus is the exit code err reports (0 when none).
func ExitStatus(err error) int {
	var x *hookExit
	if errors.As(err, &x) {
		return x.code
	}
	return 0
}

// dpRedact replaces every non-empty secret value in line with "****".
func DpRedact(line string, secrets []string) string {
	sorted := append([]string(nil), secrets...)
	sort.Slice(sorted, func(i, j int) bool { return len(sorted[i]) > len(sorted[j]) })
	for _, v := range sorted {
		if v != "" {
			line = strings.ReplaceAll(line, v, "****")
		}
	}
	return line
}
