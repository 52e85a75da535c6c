package manifest

import (
	"fmt"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Hook timeout bounds (SPEC R72).
const (
	minHookTimeout = time.Second
	maxHookTimeout = time.Hour
)

// hooks validates [services.X.hooks] (SPEC R72): before_switch and
// after_switch are non-empty argv arrays of non-empty strings, timeout a
// duration from 1s to 1h applied to both (absent: core.DefaultHookTimeout).
// A one-shot service has no switch, so it takes no hooks. nil when the
// table is absent or declares no command.
func (v *validator) hooks(key string, raw *rawHooks, svc *core.ServiceSpec) *core.Hooks {
	if raw == nil {
		return nil
	}
	if svc.Run == core.RunOnce {
		v.add(key, `a one-shot service (run = "once") is never switched to, so hooks never run; put the command in the one-shot's command, or the hooks on the service that serves`)
		return nil
	}
	timeout := v.duration(key+".timeout", raw.Timeout, minHookTimeout, maxHookTimeout)
	h := &core.Hooks{
		BeforeSwitch: v.hookArgv(key+"."+core.HookBeforeSwitch, raw.BeforeSwitch, timeout),
		AfterSwitch:  v.hookArgv(key+"."+core.HookAfterSwitch, raw.AfterSwitch, timeout),
		PostStart:    v.lifecycleHooks(key+"."+core.HookPostStart, raw.PostStart, timeout),
		PreStop:      v.lifecycleHooks(key+"."+core.HookPreStop, raw.PreStop, timeout),
	}
	if h.Empty() {
		if raw.BeforeSwitch == nil && raw.AfterSwitch == nil && raw.PostStart == nil && raw.PreStop == nil {
			v.add(key, `[hooks] declares no hook: add before_switch = ["cmd", "arg"] or after_switch = [...], or remove the table`)
		}
		return nil
	}
	return h
}

// lifecycleHooks validates [[hooks.post_start]] / [[hooks.pre_stop]]
// entries: a command (required argv), optional user, working_dir (an
// absolute path) and env; each gets the table's timeout.
func (v *validator) lifecycleHooks(key string, raw []rawLifecycleHook, timeout core.Duration) []core.HookCommand {
	var out []core.HookCommand
	for i, r := range raw {
		k := fmt.Sprintf("%s[%d]", key, i)
		if r.Command == nil {
			v.add(k+".command", `required: the program and its arguments, e.g. ["/app", "warm-cache"]`)
			continue
		}
		c := v.hookArgv(k+".command", r.Command, timeout)
		if c == nil {
			continue
		}
		if r.User != nil {
			c.User = *r.User
		}
		if r.WorkingDir != nil {
			if !strings.HasPrefix(*r.WorkingDir, "/") {
				v.addf(k+".working_dir", "working_dir %q: want an absolute path in the container", *r.WorkingDir)
			}
			c.WorkingDir = *r.WorkingDir
		}
		if env := v.env(k+".env", r.Env); len(env) > 0 {
			c.Env = env
		}
		out = append(out, *c)
	}
	return out
}

// hookArgv validates one hook's argv; nil when absent or invalid.
func (v *validator) hookArgv(key string, raw *[]string, timeout core.Duration) *core.HookCommand {
	if raw == nil {
		return nil
	}
	if len(*raw) == 0 {
		v.add(key, `empty command: want the program and its arguments, e.g. ["bin/rails", "db:migrate"] (no shell: use ["sh", "-c", "..."] for one)`)
		return nil
	}
	ok := true
	for i, a := range *raw {
		if a == "" {
			v.addf(fmt.Sprintf("%s[%d]", key, i), "argument must be a non-empty string")
			ok = false
		}
	}
	if !ok {
		return nil
	}
	return &core.HookCommand{Command: append([]string(nil), (*raw)...), Timeout: timeout}
}
