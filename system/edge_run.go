package system

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/system/docker"
)

// EdgeRunOptions are `edge run`'s settings: gordon-edge in the foreground
// for the state directory. AdminAddr "" lets the edge pick a free loopback
// port; AccessLog is off, stdout or a file (any path: no container).
type EdgeRunOptions struct {
	HTTPAddr, AdminAddr, AccessLog string
	TLS                            TLSOptions
}

// EdgeRunCommand finds gordon-edge and returns its path and arguments for
// `edge run` (the --acme-ca-root file is used in place).
func EdgeRunCommand(env Env, o EdgeRunOptions) (bin string, args []string, err error) {
	find := env.EdgeBinary
	if find == nil {
		find = FindEdgeBinary
	}
	if bin, err = find(); err != nil {
		return "", nil, err
	}
	args = []string{"run", "--state-dir", env.StateDir, "--http-addr", o.HTTPAddr}
	if o.AdminAddr != "" {
		args = append(args, "--admin-addr", o.AdminAddr)
	}
	tlsArgs, err := o.TLS.EdgeArgs(env.StateDir, false)
	if err != nil {
		return "", nil, err
	}
	args = append(args, tlsArgs...)
	if o.AccessLog != AccessLogStdout {
		args = append(args, "--access-log", o.AccessLog)
	}
	return bin, args, nil
}

// RunForeground runs bin in the foreground until it exits. When ctx ends
// (Ctrl-C, SIGTERM, or the docker CLI's plugin socket closing) the child
// gets SIGTERM and time to drain; a second signal is not needed. The
// child dies with us (Pdeathsig) if this process is killed.
func RunForeground(ctx context.Context, bin string, args []string) error {
	c := exec.Command(bin, args...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := c.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = c.Process.Signal(syscall.SIGTERM)
		return <-done
	}
}

// EdgeView is `edge status --format json`: what the traffic backend
// reports, plus the system container when there is one.
type EdgeView struct {
	AppliedGeneration uint64                     `json:"applied_generation"`
	Error             string                     `json:"error,omitempty"`
	Backends          []routetable.BackendStatus `json:"backends,omitempty"`
	// Live is false when the edge does not answer on its admin address:
	// the figures are then its last written status, from
	// StatusWrittenAt, not live counts.
	Live            bool                        `json:"live"`
	StatusWrittenAt time.Time                   `json:"status_written_at,omitzero"`
	Listeners       []routetable.ListenerStatus `json:"listeners,omitempty"`
	// RetiredBackends are the backends no route leads to any more (the
	// edge keeps their counters a few minutes after a switch).
	RetiredBackends []string       `json:"retired_backends,omitempty"`
	Container       *docker.Status `json:"container,omitempty"`
}

// InspectEdge is `edge status`: the gordon-edge container (if any) and
// what edge reports. When edge fails the view still holds the container
// and the error is edge's.
func InspectEdge(ctx context.Context, env Env, edge EdgeStatus) (EdgeView, error) {
	var v EdgeView
	cs, cerr := docker.Inspect(ctx, env.API, docker.EdgeName)
	if cerr == nil && cs.State != "absent" {
		v.Container = &cs
	}
	st, err := edge(ctx)
	if err != nil {
		return v, err
	}
	v.fill(st)
	return v, nil
}

// fill copies the traffic status st into v.
func (v *EdgeView) fill(st core.TrafficStatus) {
	v.AppliedGeneration, v.Error, v.Backends = st.AppliedGeneration, st.Error, st.Backends
	v.Live, v.StatusWrittenAt = !st.Stale, st.UpdatedAt
	v.Listeners, v.RetiredBackends = st.Listeners, st.RetiredBackends
}
