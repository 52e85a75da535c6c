package core

import (
	"context"
	"time"
)

// DefaultHookTimeout bounds one hook run when the manifest sets no timeout
// (SPEC R72).
const DefaultHookTimeout = 5 * time.Minute

// Hook names, as the manifest, the journal step ids and progress spell
// them (SPEC R72).
const (
	HookBeforeSwitch = "before_switch"
	HookAfterSwitch  = "after_switch"
	HookPostStart    = "post_start"
	HookPreStop      = "pre_stop"
)

// Hooks are the commands a deploy runs in a service's containers (SPEC
// R72). BeforeSwitch runs once per deploy in the ready primary of the
// candidate, before the edge routes to it; AfterSwitch once in the new
// primary after the switch. PostStart (compose post_start) runs in every
// instance after it started, before its readiness; PreStop (compose
// pre_stop) in every retired container before its stop signal, best
// effort. nil commands are not run.
type Hooks struct {
	BeforeSwitch *HookCommand  `json:"before_switch,omitempty"`
	AfterSwitch  *HookCommand  `json:"after_switch,omitempty"`
	PostStart    []HookCommand `json:"post_start,omitempty"`
	PreStop      []HookCommand `json:"pre_stop,omitempty"`
}

// Empty reports whether h runs nothing (a nil h is empty).
func (h *Hooks) Empty() bool {
	return h == nil || (h.BeforeSwitch == nil && h.AfterSwitch == nil && len(h.PostStart) == 0 && len(h.PreStop) == 0)
}

// HookCommand is one command a hook runs with docker exec: argv (no
// shell), a timeout (zero = DefaultHookTimeout), and compose's optional
// user, working directory, privilege and environment.
type HookCommand struct {
	Command    []string          `json:"command"`
	Timeout    Duration          `json:"timeout,omitempty"`
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	Privileged bool              `json:"privileged,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
}

// EffectiveTimeout is Timeout, or DefaultHookTimeout when zero.
func (c HookCommand) EffectiveTimeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultHookTimeout
	}
	return time.Duration(c.Timeout)
}

// ExecSpec is one command ContainerExecer runs in a running container:
// Cmd is argv (no shell); Env is KEY=VALUE pairs added to the container's
// environment; User and WorkingDir empty mean the container's.
type ExecSpec struct {
	Cmd        []string `json:"cmd"`
	Env        []string `json:"env,omitempty"`
	User       string   `json:"user,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	Privileged bool     `json:"privileged,omitempty"`
}

// ContainerExecer is an optional Runtime extension (SPEC R72 hooks):
// ExecContainer runs x in the running container id without a terminal and
// returns the command's exit code once it exits. Each line the command
// writes to stdout or stderr is passed to output as it comes (without its
// newline; output may be nil). ctx bounds the wait: when it ends first
// ExecContainer returns ctx's error (the command may go on running in the
// container). Errors: a missing container wraps ErrNotFound, a stopped one
// or a command that cannot start (missing program) ErrConflict, an
// unreachable engine ErrUnavailable. A runtime without it cannot run hooks:
// a deploy of a service that declares any fails before it creates
// anything.
type ContainerExecer interface {
	ExecContainer(ctx context.Context, id string, x ExecSpec, output func(line string)) (exitCode int, err error)
}
