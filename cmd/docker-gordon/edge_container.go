package main

// System containers (ARCHITECTURE §1): the edge proxy and the reconcile
// loop as Docker-managed containers, built locally FROM scratch from the
// installed static binaries (plugins/runtime/docker/sysimage), on the host
// network, with restart policy unless-stopped and the state directory
// bind-mounted at the same path, so they come back with the engine after a
// reboot and need neither a registry nor systemd. This is plumbing outside
// core's Runtime contract; it talks to the engine through the docker CLI's
// API client.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/spf13/cobra"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
	"github.com/gordon-deploy/docker-gordon/plugins/runtime/docker/sysimage"
)

// Container names and labels of system containers.
const (
	edgeContainerName      = "gordon-edge"
	reconcileContainerName = "gordon-reconcile"

	labelManaged      = "dev.gordon.managed"
	labelRole         = "dev.gordon.role"
	labelSystem       = "dev.gordon.system"        // "edge" or "reconcile"
	labelStateDir     = "dev.gordon.state-dir"     // host state directory
	labelSystemConfig = "dev.gordon.system-config" // hash of image and config
	// labelHandover marks an edge that hands its listeners to its
	// successor (gordon-edge R60); an edge without it is replaced by stop
	// then start.
	labelHandover = "dev.gordon.edge-handover"
	roleSystem    = "system"

	// nextSuffix names a new system container while the one it replaces
	// still runs (gordon-edge-next); it is renamed once that one is gone.
	nextSuffix = "-next"

	// containerDockerSock is where the engine socket is mounted inside the
	// reconcile container.
	containerDockerSock = "/var/run/docker.sock"
)

// systemUnit describes one system container.
type systemUnit struct {
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
}

// configHash covers everything that, when changed, requires a new container.
func (u systemUnit) configHash(imageID string) string {
	b, _ := json.Marshal([]any{imageID, u.Entrypoint, u.Cmd, u.Env, u.Binds, u.User, u.GroupAdd, int(u.StopGrace / time.Second)})
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])[:16]
}

// startResult says what ensureSystemContainer did.
type startResult struct {
	Action string // "started", "already running" or "replaced"
	ID     string
	Image  string
}

// ensureSystemContainer builds the unit's image and makes its container
// run it (idempotent): absent → create and start; same image and config and
// running → nothing; same but stopped → start; different → stop, remove,
// create, start, or, for a unit with Handover whose running container
// supports it, an upgrade without a gap (upgradeSystem). A container of
// that name that is not a gordon system container, or one serving another
// state directory, is core.ErrConflict.
func ensureSystemContainer(ctx context.Context, api client.APIClient, u systemUnit) (startResult, error) {
	img, err := sysimage.Build(ctx, api, u.Kind, u.Binaries, map[string]string{labelManaged: "true", labelRole: roleSystem})
	if err != nil {
		return startResult{}, fmt.Errorf("%s: %w", u.Name, err)
	}
	cfgHash := u.configHash(img.ID)
	res := startResult{Image: img.Ref}

	cur, err := inspectSystem(ctx, api, u.Name, u.StateDir)
	if err != nil {
		return startResult{}, err
	}
	if u.Handover {
		if cur, err = adoptNext(ctx, api, u, cur); err != nil {
			return startResult{}, err
		}
	}
	if cur != nil {
		running := cur.State != nil && (cur.State.Running || cur.State.Restarting)
		if cur.Config.Labels[labelSystemConfig] == cfgHash {
			res.ID = cur.ID
			if running {
				res.Action = "already running"
				return res, nil
			}
			if _, err := api.ContainerStart(ctx, cur.ID, client.ContainerStartOptions{}); err != nil {
				return startResult{}, fmt.Errorf("%s: start %s: %w", u.Name, shortID(cur.ID), classify(err))
			}
			res.Action = "started"
			return res, waitSettled(ctx, api, u.Name, cur.ID, cur.RestartCount, settleTime)
		}
		if u.Handover && running && !cur.State.Restarting && cur.Config.Labels[labelHandover] == "true" {
			return upgradeSystem(ctx, api, u, cur, img, cfgHash)
		}
		if err := removeSystem(ctx, api, u.Name, cur.ID, u.StopGrace); err != nil {
			return startResult{}, err
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
		return startResult{}, err
	}
	res.ID = id
	if res.Action == "" {
		res.Action = "started"
	}
	if err := waitSettled(ctx, api, u.Name, id, 0, settleTime); err != nil {
		// A new container that cannot run is removed, so that it does not
		// crash-loop under its restart policy (and take the port the moment
		// it frees up); its last log lines are in err.
		if rerr := removeSystem(ctx, api, u.Name, id, time.Second); rerr != nil {
			return res, fmt.Errorf("%w\n(removing the failed container also failed: %v; remove it with docker rm -f %s)", err, rerr, u.Name)
		}
		return startResult{}, fmt.Errorf("%w\nthe new %s container was removed; fix the cause above (e.g. choose a free --http-addr) and start again", err, u.Name)
	}
	return res, nil
}

// createSystem creates and starts the unit's container under name.
func createSystem(ctx context.Context, api client.APIClient, u systemUnit, name string, img sysimage.Image, cfgHash string) (string, error) {
	grace := int(u.StopGrace / time.Second)
	labels := map[string]string{
		labelManaged:      "true",
		labelRole:         roleSystem,
		labelSystem:       u.Kind,
		labelStateDir:     u.StateDir,
		labelSystemConfig: cfgHash,
	}
	if u.Handover {
		labels[labelHandover] = "true"
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
			NetworkMode:   "host",
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
func upgradeSystem(ctx context.Context, api client.APIClient, u systemUnit, cur *container.InspectResponse, img sysimage.Image, cfgHash string) (startResult, error) {
	res := startResult{Image: img.Ref, Action: "replaced (listeners handed over; the old edge drained)"}
	next := u.Name + nextSuffix
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
		err = waitSettled(ctx, api, next, id, 0, settleTime)
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
	c, err := inspectSystem(ctx, api, next, stateDir)
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
func adoptNext(ctx context.Context, api client.APIClient, u systemUnit, cur *container.InspectResponse) (*container.InspectResponse, error) {
	if cur != nil && cur.State != nil && (cur.State.Running || cur.State.Restarting) {
		return cur, nil
	}
	next, err := inspectSystem(ctx, api, u.Name+nextSuffix, u.StateDir)
	if err != nil || next == nil || next.State == nil || !next.State.Running {
		return cur, err
	}
	if cur != nil {
		if err := removeSystem(ctx, api, u.Name, cur.ID, time.Second); err != nil {
			return nil, err
		}
	}
	if _, err := api.ContainerRename(ctx, next.ID, client.ContainerRenameOptions{NewName: u.Name}); err != nil {
		return nil, fmt.Errorf("%s: rename %s to %s: %w", u.Name+nextSuffix, shortID(next.ID), u.Name, classify(err))
	}
	return inspectSystem(ctx, api, u.Name, u.StateDir)
}

// settleTime is how long a freshly started system container must keep
// running, unrestarted, for start to report success.
var settleTime = 2 * time.Second

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
			_ = systemLogsByID(ctx, api, name, id, false, "10", &logs, &logs)
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

// inspectSystem returns the named container, nil when there is none.
// A container of that name not labelled as a gordon system container, or
// one bound to another state directory (when stateDir is not empty), is
// core.ErrConflict.
func inspectSystem(ctx context.Context, api client.APIClient, name, stateDir string) (*container.InspectResponse, error) {
	got, err := api.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%s: inspect: %w", name, classify(err))
	}
	c := got.Container
	if c.Config == nil || c.Config.Labels[labelManaged] != "true" || c.Config.Labels[labelRole] != roleSystem {
		return nil, fmt.Errorf("container %s exists but is not a gordon system container (no %s=%s label); remove or rename it: %w", name, labelRole, roleSystem, core.ErrConflict)
	}
	if stateDir != "" && c.Config.Labels[labelStateDir] != stateDir {
		return nil, fmt.Errorf("%s serves state directory %s, not %s; stop it first (docker gordon --state-dir %s system stop): %w",
			name, c.Config.Labels[labelStateDir], stateDir, c.Config.Labels[labelStateDir], core.ErrConflict)
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

// stopSystemContainer stops and removes the named system container of this
// state directory; it reports false when there was none.
func stopSystemContainer(ctx context.Context, api client.APIClient, name, stateDir string, grace time.Duration) (bool, error) {
	cur, err := inspectSystem(ctx, api, name, stateDir)
	if err != nil || cur == nil {
		return false, err
	}
	return true, removeSystem(ctx, api, name, cur.ID, grace)
}

// systemContainerStatus is what `status` shows of one system container.
type systemContainerStatus struct {
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
}

// systemStatus inspects the named container; absent is State "absent".
func systemStatus(ctx context.Context, api client.APIClient, name string) (systemContainerStatus, error) {
	st := systemContainerStatus{Name: name, State: "absent"}
	cur, err := inspectSystem(ctx, api, name, "")
	if err != nil || cur == nil {
		return st, err
	}
	st.ID = cur.ID
	st.Image = cur.Config.Image
	st.StateDir = cur.Config.Labels[labelStateDir]
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

// renderSystemStatus writes one line per container.
func renderSystemStatus(w io.Writer, sts ...systemContainerStatus) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CONTAINER\tSTATE\tIMAGE\tSTARTED\tRESTARTS")
	for _, s := range sts {
		started := "-"
		if s.StartedAt != nil && s.State == string(container.StateRunning) {
			started = s.StartedAt.Local().Format(time.RFC3339)
		}
		img := s.Image
		if img == "" {
			img = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", s.Name, s.State, img, started, s.RestartCount)
	}
	return tw.Flush()
}

// systemLogs copies the container's logs (demultiplexed) to out and errw.
func systemLogs(ctx context.Context, api client.APIClient, name string, follow bool, tail string, out, errw io.Writer) error {
	cur, err := inspectSystem(ctx, api, name, "")
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("%s: no such system container: %w", name, core.ErrNotFound)
	}
	return systemLogsByID(ctx, api, name, cur.ID, follow, tail, out, errw)
}

func systemLogsByID(ctx context.Context, api client.APIClient, name, id string, follow bool, tail string, out, errw io.Writer) error {
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

// classify wraps an engine error with its core class.
func classify(err error) error {
	switch {
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("%w: %w", core.ErrNotFound, err)
	case cerrdefs.IsConflict(err), cerrdefs.IsAlreadyExists(err):
		return fmt.Errorf("%w: %w", core.ErrConflict, err)
	case cerrdefs.IsInvalidArgument(err):
		return fmt.Errorf("%w: %w", core.ErrInvalid, err)
	default:
		return fmt.Errorf("%w: %w", core.ErrUnavailable, err)
	}
}

// ensureStateDir creates the state directory (mode 0700) so Docker does
// not create the bind source itself.
func ensureStateDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state directory %s: %w", dir, err)
	}
	return nil
}

// containerUser runs system containers as the invoking user when it is not
// root, so files they write in the state directory stay the user's.
func containerUser() string {
	if os.Geteuid() == 0 {
		return ""
	}
	return fmt.Sprintf("%d:%d", os.Geteuid(), os.Getegid())
}

// edgeUnit is the gordon-edge system container: /gordon-edge run on the
// host network with the state directory at the same path.
func edgeUnit(stateDir, httpAddr, adminAddr string, drain time.Duration) (systemUnit, error) {
	bin, err := findEdgeBinary()
	if err != nil {
		return systemUnit{}, fmt.Errorf("%w: %w", core.ErrNotFound, err)
	}
	if bin, err = filepath.EvalSymlinks(bin); err != nil {
		return systemUnit{}, fmt.Errorf("gordon-edge binary: %w", err)
	}
	if httpAddr == "" {
		return systemUnit{}, fmt.Errorf("--http-addr is required: %w", core.ErrInvalid)
	}
	cmd := []string{"run", "--state-dir", stateDir, "--http-addr", httpAddr}
	if adminAddr != "" {
		cmd = append(cmd, "--admin-addr", adminAddr)
	}
	if drain <= 0 {
		drain = defaultEdgeDrain
	}
	if drain != defaultEdgeDrain {
		cmd = append(cmd, "--shutdown-timeout", drain.String())
	}
	return systemUnit{
		Kind:       "edge",
		Name:       edgeContainerName,
		Binaries:   map[string]string{"/gordon-edge": bin},
		Entrypoint: []string{"/gordon-edge"},
		Cmd:        cmd,
		Env:        []string{"GORDON_STATE_DIR=" + stateDir, "TMPDIR=/tmp"},
		Binds:      []string{stateDir + ":" + stateDir},
		User:       containerUser(),
		StateDir:   stateDir,
		StopGrace:  drain + 5*time.Second, // gordon-edge's drain bound, then a margin
		Handover:   true,
	}, nil
}

// defaultEdgeDrain is gordon-edge's default --shutdown-timeout: how long a
// stopping or superseded edge lets its in-flight requests and streams run.
const defaultEdgeDrain = 30 * time.Second

// edgeContainerFlags are the flags of `edge start` and `system start`.
type edgeContainerFlags struct {
	httpAddr, adminAddr string
	drain               time.Duration
	tls                 edgeTLSFlags
}

// edgeStartFile (in <state>/edge) remembers the addresses of the last
// `edge start` / `system start`, so a later start without flags comes back
// where it was (a demo on 127.0.0.1:8080 must not reappear on :80).
const edgeStartFile = "start.json"

type edgeStartAddrs struct {
	HTTPAddr  string `json:"http_addr"`
	AdminAddr string `json:"admin_addr,omitempty"`
	// Drain is --drain-timeout in seconds (0: the default).
	Drain float64 `json:"drain_seconds,omitempty"`
	edgeStartTLS
}

func (f *edgeContainerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.httpAddr, "http-addr", ":80", "public HTTP listen address of the edge (host network); default: the last start's, else :80")
	cmd.Flags().StringVar(&f.adminAddr, "admin-addr", "127.0.0.1:9180", "loopback admin address of the edge (status, in-flight counts); default: the last start's")
	cmd.Flags().DurationVar(&f.drain, "drain-timeout", defaultEdgeDrain, "how long a stopping or upgraded edge lets in-flight requests and streams (SSE, WebSocket, TCP relays) run before it cuts them; default: the last start's")
	f.tls.register(cmd)
}

// resolve fills the addresses not given on the command line from the last
// start (edgeStartFile); it reports whether any came from there.
func (f *edgeContainerFlags) resolve(cmd *cobra.Command, stateDir string) bool {
	data, err := os.ReadFile(filepath.Join(stateDir, "edge", edgeStartFile))
	if err != nil {
		return false
	}
	var last edgeStartAddrs
	if json.Unmarshal(data, &last) != nil {
		return false
	}
	used := false
	if !cmd.Flags().Changed("http-addr") && last.HTTPAddr != "" && last.HTTPAddr != f.httpAddr {
		f.httpAddr, used = last.HTTPAddr, true
	}
	if !cmd.Flags().Changed("admin-addr") && last.AdminAddr != "" && last.AdminAddr != f.adminAddr {
		f.adminAddr, used = last.AdminAddr, true
	}
	if d := time.Duration(last.Drain * float64(time.Second)); !cmd.Flags().Changed("drain-timeout") && d > 0 {
		f.drain = d
	}
	if f.tls.resolve(cmd, last.edgeStartTLS) {
		used = true
	}
	return used
}

// remember records the addresses of a successful start (best effort).
func (f *edgeContainerFlags) remember(stateDir string) {
	last := edgeStartAddrs{HTTPAddr: f.httpAddr, AdminAddr: f.adminAddr, edgeStartTLS: f.tls.remembered()}
	if f.drain != defaultEdgeDrain {
		last.Drain = f.drain.Seconds()
	}
	data, err := json.Marshal(last)
	dir := filepath.Join(stateDir, "edge")
	if err == nil && os.MkdirAll(dir, 0o700) == nil {
		_ = edgestate.WriteFileAtomic(filepath.Join(dir, edgeStartFile), append(data, '\n'))
	}
}

// printEdgeAddr says where the edge listens (and that the address is the
// last start's when no flag gave it).
func printEdgeAddr(w io.Writer, f edgeContainerFlags, remembered bool) {
	fmt.Fprintf(w, "gordon-edge: HTTP on %s, admin on %s", f.httpAddr, f.adminAddr)
	if f.tls.httpsAddr != "" {
		fmt.Fprintf(w, ", HTTPS on %s", f.tls.httpsAddr)
	}
	if remembered {
		fmt.Fprint(w, " (as at the last start; --http-addr/--admin-addr change them)")
	}
	fmt.Fprintln(w)
}

// printStart reports what ensureSystemContainer did.
func printStart(w io.Writer, name string, r startResult) {
	fmt.Fprintf(w, "%s: %s (%s, image %s)\n", name, r.Action, shortID(r.ID), r.Image)
}

// newEdgeContainerCommands returns `edge start`, `edge stop` and `edge logs`.
func newEdgeContainerCommands(env *cliEnv) []*cobra.Command {
	var flags edgeContainerFlags
	start := &cobra.Command{
		Use:   "start",
		Short: "Run gordon-edge as a Docker-managed system container (host network, restart unless-stopped)",
		Long: `Build the image gordon-system/edge:<hash> locally FROM scratch from the
installed gordon-edge binary and run it as the container gordon-edge on the
host network with restart policy unless-stopped and the state directory
bind-mounted at the same path, so it comes back after an engine restart or a
reboot. Idempotent: a running container with the same binary and flags is
left alone; a different binary or flags replace it without a gap: the new
edge starts beside the old one (as gordon-edge-next), takes its listening
sockets over, the old one drains its in-flight requests and streams
(--drain-timeout) and exits, and the new one is renamed gordon-edge.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			remembered := flags.resolve(cmd, env.opts.stateDir)
			u, err := edgeUnit(env.opts.stateDir, flags.httpAddr, flags.adminAddr, flags.drain)
			if err != nil {
				return err
			}
			if err := withEdgeTLS(&u, flags.tls, env.opts.stateDir); err != nil {
				return err
			}
			if err := ensureStateDir(env.opts.stateDir); err != nil {
				return err
			}
			r, err := ensureSystemContainer(cmd.Context(), env.dockerCli.Client(), u)
			if err != nil {
				return err
			}
			flags.remember(env.opts.stateDir)
			printStart(env.dockerCli.Out(), u.Name, r)
			printEdgeAddr(env.dockerCli.Out(), flags, remembered)
			return nil
		},
	}
	flags.register(start)

	stop := &cobra.Command{
		Use:   "stop",
		Short: "Stop and remove the gordon-edge system container",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runStopSystem(cmd.Context(), env, edgeContainerName, 35*time.Second)
		},
	}

	logs := newSystemLogsCommand(env, "logs", "Show the logs of the gordon-edge system container", func(string) (string, error) { return edgeContainerName, nil }, cobra.NoArgs)
	return []*cobra.Command{start, stop, logs}
}

func runStopSystem(ctx context.Context, env *cliEnv, name string, grace time.Duration) error {
	found, err := stopSystemContainer(ctx, env.dockerCli.Client(), name, env.opts.stateDir, grace)
	if err != nil {
		return err
	}
	if found {
		fmt.Fprintf(env.dockerCli.Out(), "%s: stopped and removed\n", name)
	} else {
		fmt.Fprintf(env.dockerCli.Out(), "%s: not running\n", name)
	}
	return nil
}

// newSystemLogsCommand is `logs [-f] [--tail N]` for the container chosen
// by pick from the arguments.
func newSystemLogsCommand(env *cliEnv, use, short string, pick func(arg string) (string, error), args cobra.PositionalArgs) *cobra.Command {
	var follow bool
	var tail string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, a []string) error {
			arg := ""
			if len(a) > 0 {
				arg = a[0]
			}
			name, err := pick(arg)
			if err != nil {
				return err
			}
			if tail != "all" {
				if n, err := strconv.Atoi(tail); err != nil || n < 0 {
					return fmt.Errorf("--tail %q: a number of lines or \"all\": %w", tail, core.ErrInvalid)
				}
			}
			return systemLogs(cmd.Context(), env.dockerCli.Client(), name, follow, tail, env.dockerCli.Out(), env.dockerCli.Err())
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log output")
	cmd.Flags().StringVar(&tail, "tail", "all", "number of lines to show from the end of the logs")
	return cmd
}
