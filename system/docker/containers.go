// Package docker runs gordon's system containers (ARCHITECTURE §1):
// the edge proxy and the reconcile loop as Docker-managed containers,
// built locally FROM scratch from the installed static binaries (system/image),
// on the host network, with restart policy unless-stopped and the state
// directory bind-mounted at the same path, so they come back with the
// engine after a reboot and need neither a registry nor systemd. This is
// plumbing outside core's Runtime contract; it talks to the engine through
// a moby API client, and every engine error carries its core class
// (dockererr).
package docker

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
	"github.com/gordon-deploy/docker-gordon/system/image"
)

// Container names and labels of system containers.
const (
	EdgeName      = "gordon-edge"
	ReconcileName = "gordon-reconcile"

	LabelManaged      = "dev.gordon.managed"
	LabelRole         = "dev.gordon.role"
	LabelSystem       = "dev.gordon.system"        // "edge" or "reconcile"
	LabelStateDir     = "dev.gordon.state-dir"     // host state directory
	LabelSystemConfig = "dev.gordon.system-config" // hash of image and config
	// LabelHandover marks an edge that hands its listeners to its
	// successor (gordon-edge R60); an edge without it is replaced by stop
	// then start.
	LabelHandover = "dev.gordon.edge-handover"
	RoleSystem    = "system"

	// NextSuffix names a new system container while the one it replaces
	// still runs (gordon-edge-next); it is renamed once that one is gone.
	NextSuffix = "-next"

	// DockerSock is where the engine socket is mounted inside the
	// reconcile container.
	DockerSock = "/var/run/docker.sock"
)

// Unit describes one system container.
type Unit struct {
	Kind       string            // "edge" or "reconcile": the image name and label
	Name       string            // container name
	Binaries   map[string]string // path in image → host path
	Entrypoint []string
	Cmd        []string
	Env        []string
	Binds      []string // host:container[:ro]
	User       string
	GroupAdd   []string
	StateDir   string
	StopGrace  time.Duration
	// Handover: the new container starts beside the running one, takes
	// its listeners over and the old one drains and exits (edge, R60).
	Handover bool
	// Network is the container's network ("": the host network). On a
	// swarm the reconcile loop runs on the edge overlay.
	Network string
}

// configHash covers everything that, when changed, requires a new container.
func (u Unit) ConfigHash(imageID string) string {
	parts := []any{imageID, u.Entrypoint, u.Cmd, u.Env, u.Binds, u.User, u.GroupAdd, int(u.StopGrace / time.Second)}
	if u.Network != "" {
		parts = append(parts, u.Network) // host-network units keep their hash
	}
	b, _ := json.Marshal(parts)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// Result says what Ensure did.
type Result struct {
	Action string // "started", "unchanged (already running)" or "replaced"
	ID     string
	Image  string
}

// Ensure builds the unit's image and makes its container
// run it (idempotent): absent → create and start; same image and config and
// running → nothing; same but stopped → start; different → stop, remove,
// create, start, or, for a unit with Handover whose running container
// supports it, an upgrade without a gap (upgradeSystem). A container of
// that name that is not a gordon system container, or one serving another
// state directory, is core.ErrConflict.
func Ensure(ctx context.Context, api client.APIClient, u Unit) (Result, error) {
	img, err := image.Build(ctx, api, u.Kind, u.Binaries, map[string]string{LabelManaged: "true", LabelRole: RoleSystem})
	if err != nil {
		return Result{}, fmt.Errorf("%s: %w", u.Name, err)
	}
	cfgHash := u.ConfigHash(img.ID)
	res := Result{Image: img.Ref}

	cur, err := inspectUnit(ctx, api, u.Name, u.StateDir)
	if err != nil {
		return Result{}, err
	}
	if u.Handover {
		if cur, err = adoptNext(ctx, api, u, cur); err != nil {
			return Result{}, err
		}
	}
	if cur != nil {
		running := cur.State != nil && (cur.State.Running || cur.State.Restarting)
		if cur.Config.Labels[LabelSystemConfig] == cfgHash {
			res.ID = cur.ID
			if running {
				res.Action = "unchanged (already running)"
				return res, nil
			}
			if _, err := api.ContainerStart(ctx, cur.ID, client.ContainerStartOptions{}); err != nil {
				return Result{}, fmt.Errorf("%s: start %s: %w", u.Name, shortID(cur.ID), classify(err))
			}
			res.Action = "started"
			return res, waitSettled(ctx, api, u.Name, cur.ID, cur.RestartCount, SettleTime)
		}
		if u.Handover && running && !cur.State.Restarting && cur.Config.Labels[LabelHandover] == "true" {
			return upgradeSystem(ctx, api, u, cur, img, cfgHash)
		}
		if err := removeSystem(ctx, api, u.Name, cur.ID, u.StopGrace); err != nil {
			return Result{}, err
		}
		res.Action = "replaced"
		if cur.Image != img.ID {
			// The superseded image is garbage unless something else uses
			// it; the engine refuses to remove an image in use.
			_, _ = api.ImageRemove(ctx, cur.Image, client.ImageRemoveOptions{PruneChildren: true})
		}
	}

	id, err := createSystem(ctx, api, u, u.Name, img, cfgHash)
	if err != nil {
		return Result{}, err
	}
	res.ID = id
	if res.Action == "" {
		res.Action = "started"
	}
	if err := waitSettled(ctx, api, u.Name, id, 0, SettleTime); err != nil {
		// A new container that cannot run is removed, so that it does not
		// crash-loop under its restart policy (and take the port the moment
		// it frees up); its last log lines are in err.
		if rerr := removeSystem(ctx, api, u.Name, id, time.Second); rerr != nil {
			return res, fmt.Errorf("%w\n(removing the failed container also failed: %v; remove it with docker rm -f %s)", err, rerr, u.Name)
		}
		return Result{}, fmt.Errorf("%w\nthe new %s container was removed; fix the cause above (e.g. choose a free --http-addr) and start again", err, u.Name)
	}
	return res, nil
}

// createSystem creates and starts the unit's container under name.
func createSystem(ctx context.Context, api client.APIClient, u Unit, name string, img image.Image, cfgHash string) (string, error) {
	grace := int(u.StopGrace / time.Second)
	labels := map[string]string{
		LabelManaged:      "true",
		LabelRole:         RoleSystem,
		LabelSystem:       u.Kind,
		LabelStateDir:     u.StateDir,
		LabelSystemConfig: cfgHash,
	}
	if u.Handover {
		labels[LabelHandover] = "true"
	}
	created, err := api.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:       img.Ref,
			Entrypoint:  u.Entrypoint,
			Cmd:         u.Cmd,
			Env:         u.Env,
			User:        u.User,
			StopTimeout: &grace,
			Labels:      labels,
		},
		HostConfig: &container.HostConfig{
			NetworkMode:   container.NetworkMode(cmp.Or(u.Network, "host")),
			RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyUnlessStopped},
			Binds:         u.Binds,
			GroupAdd:      u.GroupAdd,
			LogConfig:     container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "10m", "max-file": "3"}},
		},
	})
	if err != nil {
		return "", fmt.Errorf("%s: create: %w", name, classify(err))
	}
	if _, err := api.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		_, _ = api.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true})
		return "", fmt.Errorf("%s: start %s: %w", name, shortID(created.ID), classify(err))
	}
	return created.ID, nil
}

// upgradeSystem replaces the running container cur without a gap (edge,
// gordon-edge R60): cur's restart policy becomes "no" (its exit after the
// hand-over must not bring it back), the new container starts as
// <name>-next beside it and takes its listeners over, cur drains its
// in-flight requests and exits on its own within its stop grace (else it
// is stopped), then cur is removed and the new container renamed <name>.
// A new container that fails to start is removed and cur gets its restart
// policy back: it never stopped serving.
func upgradeSystem(ctx context.Context, api client.APIClient, u Unit, cur *container.InspectResponse, img image.Image, cfgHash string) (Result, error) {
	res := Result{Image: img.Ref, Action: "replaced (listeners handed over; the old edge drained)"}
	next := u.Name + NextSuffix
	if err := removeStaleNext(ctx, api, next, u.StateDir); err != nil {
		return res, err
	}
	policy := func(p container.RestartPolicyMode) error {
		_, err := api.ContainerUpdate(context.WithoutCancel(ctx), cur.ID, client.ContainerUpdateOptions{RestartPolicy: &container.RestartPolicy{Name: p}})
		if err != nil {
			return fmt.Errorf("%s: set restart policy %s: %w", u.Name, p, classify(err))
		}
		return nil
	}
	if err := policy(container.RestartPolicyDisabled); err != nil {
		return res, err
	}
	id, err := createSystem(ctx, api, u, next, img, cfgHash)
	if err == nil {
		err = waitSettled(ctx, api, next, id, 0, SettleTime)
		if err != nil {
			_, _ = api.ContainerRemove(context.WithoutCancel(ctx), id, client.ContainerRemoveOptions{Force: true})
		}
	}
	if err != nil {
		if img.ID != cur.Image {
			// Garbage unless something else uses it (the engine refuses then).
			_, _ = api.ImageRemove(context.WithoutCancel(ctx), img.ID, client.ImageRemoveOptions{PruneChildren: true})
		}
		if perr := policy(container.RestartPolicyUnlessStopped); perr != nil {
			return res, fmt.Errorf("%w (and %w)", err, perr)
		}
		return res, fmt.Errorf("%w; the running %s keeps serving", err, u.Name)
	}
	res.ID = id
	// The old edge exits once drained (its stop grace bounds the drain).
	wctx, cancel := context.WithTimeout(ctx, u.StopGrace+10*time.Second)
	defer cancel()
	w := api.ContainerWait(wctx, cur.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	select {
	case <-w.Result:
	case <-w.Error:
	case <-wctx.Done():
	}
	if err := removeSystem(ctx, api, u.Name, cur.ID, 5*time.Second); err != nil {
		return res, err
	}
	if cur.Image != img.ID {
		_, _ = api.ImageRemove(ctx, cur.Image, client.ImageRemoveOptions{PruneChildren: true})
	}
	if _, err := api.ContainerRename(ctx, id, client.ContainerRenameOptions{NewName: u.Name}); err != nil {
		return res, fmt.Errorf("%s: rename %s to %s: %w (it serves; the next start renames it)", next, shortID(id), u.Name, classify(err))
	}
	return res, nil
}

// removeStaleNext removes a <name>-next left by an upgrade that did not
// finish, when it does not run (a running one is adopted by adoptNext).
func removeStaleNext(ctx context.Context, api client.APIClient, next, stateDir string) error {
	c, err := inspectUnit(ctx, api, next, stateDir)
	if err != nil || c == nil {
		return err
	}
	if c.State != nil && c.State.Running {
		return fmt.Errorf("%s is running (an upgrade in progress?); retry once it ends: %w", next, core.ErrConflict)
	}
	return removeSystem(ctx, api, next, c.ID, time.Second)
}

// adoptNext finishes an upgrade that was interrupted after the new
// container took over: with no running <name> but a running <name>-next,
// the stopped <name> (if any) is removed, the latter renamed and returned
// as the current container.
func adoptNext(ctx context.Context, api client.APIClient, u Unit, cur *container.InspectResponse) (*container.InspectResponse, error) {
	if cur != nil && cur.State != nil && (cur.State.Running || cur.State.Restarting) {
		return cur, nil
	}
	next, err := inspectUnit(ctx, api, u.Name+NextSuffix, u.StateDir)
	if err != nil || next == nil || next.State == nil || !next.State.Running {
		return cur, err
	}
	if cur != nil {
		if err := removeSystem(ctx, api, u.Name, cur.ID, time.Second); err != nil {
			return nil, err
		}
	}
	if _, err := api.ContainerRename(ctx, next.ID, client.ContainerRenameOptions{NewName: u.Name}); err != nil {
		return nil, fmt.Errorf("%s: rename %s to %s: %w", u.Name+NextSuffix, shortID(next.ID), u.Name, classify(err))
	}
	return inspectUnit(ctx, api, u.Name, u.StateDir)
}

// SettleTime is how long a freshly started system container must keep
// running, unrestarted, for start to report success.
var SettleTime = 2 * time.Second

// waitSettled fails when the container exits or restarts within d (a bad
// listen address, a missing socket, …), quoting its last log lines; the
// container is left in place for `logs` and `stop`.
func waitSettled(ctx context.Context, api client.APIClient, name, id string, baseRestarts int, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		got, err := api.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("%s: inspect after start: %w", name, classify(err))
		}
		c := got.Container
		if c.State == nil || !c.State.Running || c.State.Restarting || c.RestartCount > baseRestarts {
			var logs strings.Builder
			_ = logsByID(ctx, api, name, id, false, "10", &logs, &logs)
			state := "unknown"
			if c.State != nil {
				state = fmt.Sprintf("%s, exit code %d", c.State.Status, c.State.ExitCode)
			}
			return fmt.Errorf("%s: exited right after start (%s, %d restarts): %w\n%s", name, state, c.RestartCount, core.ErrUnavailable, strings.TrimSpace(logs.String()))
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CheckFree refuses (core.ErrConflict), before a start changes anything,
// a container of that name that is not a gordon system container or that
// serves another state directory; none, or this state directory's, is nil.
func CheckFree(ctx context.Context, api client.APIClient, name, stateDir string) error {
	_, err := inspectUnit(ctx, api, name, stateDir)
	return err
}

// inspectUnit returns the named container, nil when there is none.
// A container of that name not labelled as a gordon system container, or
// one bound to another state directory (when stateDir is not empty), is
// core.ErrConflict.
func inspectUnit(ctx context.Context, api client.APIClient, name, stateDir string) (*container.InspectResponse, error) {
	got, err := api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: inspect: %w", name, classify(err))
	}
	c := got.Container
	if c.Config == nil || c.Config.Labels[LabelManaged] != "true" || c.Config.Labels[LabelRole] != RoleSystem {
		return nil, fmt.Errorf("container %s exists but is not a gordon system container (no %s=%s label); remove or rename it: %w", name, LabelRole, RoleSystem, core.ErrConflict)
	}
	if stateDir != "" && c.Config.Labels[LabelStateDir] != stateDir {
		return nil, fmt.Errorf("%s serves state directory %s, not %s; stop it first (docker gordon --state-dir %s system stop), or run this state directory's edge in the foreground on other ports: docker gordon edge run --http-addr 127.0.0.1:8090 --admin-addr 127.0.0.1:9191: %w",
			name, c.Config.Labels[LabelStateDir], stateDir, c.Config.Labels[LabelStateDir], core.ErrConflict)
	}
	return &c, nil
}

// removeSystem stops (SIGTERM, then kill after grace) and removes a system
// container. A container that is already gone is not an error.
func removeSystem(ctx context.Context, api client.APIClient, name, id string, grace time.Duration) error {
	secs := int(grace / time.Second)
	if _, err := api.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s: stop %s: %w", name, shortID(id), classify(err))
	}
	if _, err := api.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("%s: remove %s: %w", name, shortID(id), classify(err))
	}
	return nil
}

// Stop stops and removes the named system container of this
// state directory; it reports false when there was none.
func Stop(ctx context.Context, api client.APIClient, name, stateDir string, grace time.Duration) (bool, error) {
	cur, err := inspectUnit(ctx, api, name, stateDir)
	if err != nil || cur == nil {
		return false, err
	}
	return true, removeSystem(ctx, api, name, cur.ID, grace)
}

// Status is what `status` shows of one system container.
type Status struct {
	Name          string     `json:"name"`
	ID            string     `json:"id,omitempty"`
	State         string     `json:"state"` // engine state, or "absent"
	Image         string     `json:"image,omitempty"`
	StartedAt     *time.Time `json:"started_at,omitempty"`
	RestartPolicy string     `json:"restart_policy,omitempty"`
	RestartCount  int        `json:"restart_count"`
	ExitCode      int        `json:"exit_code"`
	Error         string     `json:"error,omitempty"`
	StateDir      string     `json:"state_dir,omitempty"`
	// Cmd is the container's command (the reconcile unit's flags tell
	// system start's watcher, with --boot, from edge start's).
	Cmd []string `json:"cmd,omitempty"`
}

// systemStatus inspects the named container; absent is State "absent".
func Inspect(ctx context.Context, api client.APIClient, name string) (Status, error) {
	st := Status{Name: name, State: "absent"}
	cur, err := inspectUnit(ctx, api, name, "")
	if err != nil || cur == nil {
		return st, err
	}
	st.ID = cur.ID
	st.Image = cur.Config.Image
	st.StateDir = cur.Config.Labels[LabelStateDir]
	st.Cmd = cur.Config.Cmd
	st.RestartCount = cur.RestartCount
	if cur.HostConfig != nil {
		st.RestartPolicy = string(cur.HostConfig.RestartPolicy.Name)
	}
	if s := cur.State; s != nil {
		st.State = string(s.Status)
		st.ExitCode = s.ExitCode
		st.Error = s.Error
		if t, err := time.Parse(time.RFC3339Nano, s.StartedAt); err == nil && !t.IsZero() && t.Year() > 1 {
			st.StartedAt = &t
		}
	}
	return st, nil
}

func Logs(ctx context.Context, api client.APIClient, name string, follow bool, tail string, out, errw io.Writer) error {
	cur, err := inspectUnit(ctx, api, name, "")
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%s: no such system container: %w", name, core.ErrNotFound)
	}
	return logsByID(ctx, api, name, cur.ID, follow, tail, out, errw)
}

func logsByID(ctx context.Context, api client.APIClient, name, id string, follow bool, tail string, out, errw io.Writer) error {
	rc, err := api.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Follow: follow, Tail: tail})
	if err != nil {
		return fmt.Errorf("%s: logs: %w", name, classify(err))
	}
	defer rc.Close()
	if _, err := stdcopy.StdCopy(out, errw, rc); err != nil && ctx.Err() == nil {
		return fmt.Errorf("%s: logs: %w", name, err)
	}
	return nil
}

// classify wraps an engine error with its core class (dockererr).
func classify(err error) error { return dockererr.Classify(err) }

// shortID is the first 12 hex digits of a container or image ID.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
