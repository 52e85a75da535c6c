package compose

import (
	"fmt"
	"maps"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"
)

// hooks is [services.X.hooks] as convert writes it: compose's lifecycle
// hooks (SPEC R72).
type hooks struct {
	PostStart []lifecycleHook `toml:"post_start,omitempty"`
	PreStop   []lifecycleHook `toml:"pre_stop,omitempty"`
}

type lifecycleHook struct {
	Command    []string          `toml:"command"`
	User       string            `toml:"user,omitempty"`
	WorkingDir string            `toml:"working_dir,omitempty"`
	Env        map[string]string `toml:"env,omitempty"`
}

// lifecycleHooks maps compose's post_start and pre_stop (R72): each runs
// with docker exec, post_start in every new container after it started
// (before readiness; a failure fails the start), pre_stop in a container
// before its stop signal (best effort). A privileged hook is refused like
// a privileged service; an environment entry without a value is refused
// (it would be read from the converting shell).
func (m *mapper) lifecycleHooks(name string, svc *types.ServiceConfig, out *service) {
	base := "services." + name
	var h hooks
	for _, set := range []struct {
		key  string
		in   []types.ServiceHook
		dest *[]lifecycleHook
	}{{"post_start", svc.PostStart, &h.PostStart}, {"pre_stop", svc.PreStop, &h.PreStop}} {
		for i, in := range set.in {
			k := fmt.Sprintf("%s.%s[%d]", base, set.key, i)
			if in.Privileged {
				m.refuse(k+".privileged", "a privileged hook cannot be honoured: docker gordon runs nothing privileged; remove privileged")
				continue
			}
			if len(in.Command) == 0 {
				m.refuse(k+".command", "a hook needs a command")
				continue
			}
			lh := lifecycleHook{Command: append([]string(nil), in.Command...), User: in.User, WorkingDir: in.WorkingDir}
			for _, ek := range slices.Sorted(maps.Keys(in.Environment)) {
				v := in.Environment[ek]
				if v == nil {
					m.refuse(k+".environment", "environment %s has no value: write %s=VALUE", ek, ek)
					continue
				}
				if lh.Env == nil {
					lh.Env = map[string]string{}
				}
				lh.Env[ek] = *v
			}
			*set.dest = append(*set.dest, lh)
			m.from(fmt.Sprintf("%s.hooks.%s[%d]", base, set.key, len(*set.dest)-1), k)
		}
	}
	if len(h.PostStart) > 0 || len(h.PreStop) > 0 {
		out.Hooks = &h
	}
}
