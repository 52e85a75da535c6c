package swarm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/volxfer"
)

// helperEndTimeout bounds the wait for the helper's task to end once the
// transfer is done.
var helperEndTimeout = 30 * time.Second

// transfer moves volume vol's tar on node (a node ID) in mode: it listens
// on this process's control-network address, runs the helper service
// there, and calls move with the helper's connection. The helper is
// removed whatever happens, also when ctx ends. The helper must connect
// within Options.StartTimeout; a failed or rejected helper task, or its
// node seen down, ends the transfer with that reason.
func (r *Runtime) transfer(ctx context.Context, what string, vol mount.Mount, node string, mode byte, move func(*volxfer.Conn) error) error {
	ip, netID, err := r.controlAddr(ctx, what)
	if err != nil {
		return err
	}
	image, err := r.edgeImage(ctx, what)
	if err != nil {
		return err
	}
	if err := r.helperNodeUp(ctx, node); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	r.sweepHelpers(ctx)
	ln, err := volxfer.Listen(ip, mode)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", what, core.ErrUnavailable, err)
	}
	defer ln.Close()
	id, err := r.createHelper(ctx, helperSpec(image, node, netID, vol, mode, ln.Env()), what)
	if err != nil {
		return err
	}
	defer r.removeHelper(ctx, id)
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var connected atomic.Bool
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		r.watchHelper(wctx, cancel, id, node, ln.Addr(), &connected)
	}()
	conn, err := ln.Accept(wctx)
	if err != nil {
		return r.helperFailed(ctx, wctx, id, what, err)
	}
	connected.Store(true)
	stop := context.AfterFunc(wctx, func() { conn.Close() })
	err = move(conn)
	stop()
	conn.Close()
	if err != nil {
		return r.helperFailed(ctx, wctx, id, what, err)
	}
	cancel(nil)
	<-watched
	return r.awaitHelperEnd(ctx, id, what)
}

// helperFailed is the error of a transfer that failed with err: ctx's
// when the caller's context ended; the helper's own message when it sent
// one; else the watcher's reason (wctx's cause) when it ended the
// transfer; else err. A failure of the transfer itself wraps
// core.ErrUnavailable and quotes the helper's last log lines.
func (r *Runtime) helperFailed(ctx, wctx context.Context, id, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var pe *volxfer.PeerError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w: %s", what, core.ErrUnavailable, pe.Msg)
	case wctx.Err() != nil:
		return fmt.Errorf("%s: %w", what, context.Cause(wctx))
	case errors.Is(err, volxfer.ErrCut):
		return fmt.Errorf("%s: %w: %w%s", what, core.ErrUnavailable, err, r.helperLog(ctx, id))
	}
	return fmt.Errorf("%s: %w", what, err)
}

// helperNodeUp checks that node can run the helper now (an error
// wrapping core.ErrUnavailable that names the node and what to do).
func (r *Runtime) helperNodeUp(ctx context.Context, node string) error {
	res, err := r.cli.NodeInspect(ctx, node, client.NodeInspectOptions{})
	if err != nil {
		return fmt.Errorf("%w: the volume lives on node %s, which the swarm manager could not read (%v): bring it back (docker node ls)",
			core.ErrUnavailable, short(node), err)
	}
	if why := usable(res.Node); why != "" {
		return fmt.Errorf("%w: the volume lives on node %s: %s", core.ErrUnavailable, hostname(res.Node), why)
	}
	return nil
}

// helperSpec is the helper service: the edge image's `/gordon-edge
// volume-helper` with env, one task pinned to node, the volume at
// volxfer.MountPath (read-only for an export), on the control network
// netID only, never restarted, logging to json-file.
func helperSpec(image, node, netID string, vol mount.Mount, mode byte, env []string) swarm.ServiceSpec {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	one := uint64(1)
	m := mount.Mount{Type: mount.TypeVolume, Source: vol.Source, Target: volxfer.MountPath, ReadOnly: mode == volxfer.ModeExport, VolumeOptions: vol.VolumeOptions}
	return swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "gordon-volume-" + hex.EncodeToString(suffix),
			Labels: map[string]string{core.LabelManaged: "true", core.LabelRole: roleVolumeHelper}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{Image: image, Command: []string{"/gordon-edge", "volume-helper"}, Env: env, Mounts: []mount.Mount{m},
				Labels: map[string]string{core.LabelManaged: "true", core.LabelRole: roleVolumeHelper}},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: []string{"node.id==" + node}},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: netID}},
			LogDriver:     &swarm.Driver{Name: "json-file"},
		},
		Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &one}},
	}
}

// createHelper creates the helper service spec.
func (r *Runtime) createHelper(ctx context.Context, spec swarm.ServiceSpec, what string) (string, error) {
	res, err := r.cli.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: core.RegistryAuthFrom(ctx)})
	if err != nil {
		return "", r.classify(err, what+": create the volume helper service")
	}
	return res.ID, nil
}

// sweepHelpers removes the helper services a process that ended during
// its transfer left behind: those whose task has ended, or that have
// none an hour after their creation (best effort).
func (r *Runtime) sweepHelpers(ctx context.Context) {
	res, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: make(client.Filters).Add("label", core.LabelRole+"="+roleVolumeHelper)})
	if err != nil {
		return
	}
	for _, s := range res.Items {
		if s.Spec.Labels[core.LabelManaged] != "true" || s.Spec.Labels[core.LabelRole] != roleVolumeHelper {
			continue
		}
		tasks, err := r.tasks(ctx, s.ID)
		if err != nil {
			continue
		}
		t, ok := currentTask(tasks)
		if (ok && terminal(t.Status.State)) || (!ok && time.Since(s.CreatedAt) > time.Hour) {
			r.removeHelper(ctx, s.ID)
		}
	}
}

// removeHelper removes the helper service, also after ctx ended.
func (r *Runtime) removeHelper(ctx context.Context, id string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_, _ = r.cli.ServiceRemove(rctx, id, client.ServiceRemoveOptions{})
}

// watchHelper ends the transfer (cancel, with the reason in the user's
// words) when the helper's task fails, is rejected or shut down, when it
// completes before it connected, when it has not connected within
// Options.StartTimeout, or when its node is seen down; it returns when ctx
// ends.
func (r *Runtime) watchHelper(ctx context.Context, cancel context.CancelCauseFunc, id, node, addr string, connected *atomic.Bool) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	start, checked := time.Now(), time.Now()
	where := r.nodeName(ctx, node)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if tasks, err := r.tasks(ctx, id); err == nil {
			if t, ok := currentTask(tasks); ok {
				if why := helperEnded(t, connected.Load()); why != "" {
					cancel(fmt.Errorf("%w: the volume helper on node %s %s%s", core.ErrUnavailable, where, why, hinted(r.helperLog(ctx, id))))
					return
				}
			}
		}
		if time.Since(checked) >= time.Second {
			checked = time.Now()
			if err := r.helperNodeUp(ctx, node); err != nil && ctx.Err() == nil {
				cancel(err)
				return
			}
		}
		if !connected.Load() && time.Since(start) > r.opts.StartTimeout {
			cancel(fmt.Errorf("%w: the volume helper on node %s did not reach this manager at %s within %v; its task is %s: check that the node runs the edge (docker gordon system status) and reaches the control network %s",
				core.ErrUnavailable, where, addr, r.opts.StartTimeout, r.helperState(ctx, id), r.opts.EdgeNetwork))
			return
		}
	}
}

// helperEnded says why task t of the helper ended the transfer ("" when
// it did not): failed, rejected or shut down; completed before it
// connected (connected false).
func helperEnded(t swarm.Task, connected bool) string {
	switch t.Status.State {
	case swarm.TaskStateFailed, swarm.TaskStateRejected, swarm.TaskStateShutdown, swarm.TaskStateOrphaned, swarm.TaskStateRemove:
		return "failed: " + taskError(t)
	case swarm.TaskStateComplete:
		if !connected {
			return "ended without reaching this manager"
		}
	}
	return ""
}

// hinted adds what to do to the helper's log when it says the edge's
// image has no volume helper (an edge older than this runtime).
func hinted(log string) string {
	if strings.Contains(log, `unknown command "volume-helper"`) {
		return log + "; the edge's image predates volume snapshots: update the edge with docker gordon system start, then try again"
	}
	return log
}

// helperState is the helper's current task, in words.
func (r *Runtime) helperState(ctx context.Context, id string) string {
	tasks, err := r.tasks(ctx, id)
	if err != nil {
		return "unknown"
	}
	if t, ok := currentTask(tasks); ok {
		return taskError(t)
	}
	return "not created yet"
}

// helperLog is the helper's last output lines (its error), as ": …", or ""
// when there are none.
func (r *Runtime) helperLog(ctx context.Context, id string) string {
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var lines []string
	_ = r.Logs(lctx, id, core.LogOptions{Tail: 3}, func(l core.LogLine) error {
		if s := strings.TrimSpace(l.Text); s != "" {
			lines = append(lines, s)
		}
		return nil
	})
	if len(lines) == 0 {
		return ""
	}
	return ": it said: " + strings.Join(lines, " / ")
}

// nodeName is node's hostname when known, else its short ID.
func (r *Runtime) nodeName(ctx context.Context, node string) string {
	st := core.ContainerState{Node: node}
	r.nameNode(ctx, &st)
	if st.Node == node {
		return short(node)
	}
	return st.Node
}

// awaitHelperEnd waits (at most helperEndTimeout) until the helper's task
// ends: failed is an error, with its log; still running then is taken as
// done (both ends confirmed the transfer; the removal stops it).
func (r *Runtime) awaitHelperEnd(ctx context.Context, id, what string) error {
	deadline := time.Now().Add(helperEndTimeout)
	for time.Now().Before(deadline) {
		tasks, err := r.tasks(ctx, id)
		if err != nil {
			return nil
		}
		if t, ok := currentTask(tasks); ok && terminal(t.Status.State) {
			if t.Status.State == swarm.TaskStateComplete {
				return nil
			}
			return fmt.Errorf("%s: %w: the volume helper %s%s", what, core.ErrUnavailable, taskError(t), r.helperLog(ctx, id))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
	}
	return nil
}
