package system

// Docker Swarm: system start on a swarm manager puts gordon-edge on the
// nodes as a global service (system/swarm) and writes <state>/swarm.json.
// From then on this state directory's runtime is runtime/swarm, and every
// engine verb runs in a runner container on the manager attached to the
// edge overlay: the probes reach task IPs there, and traffic/edge pushes
// each route table to every edge task over it.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/system/docker"
	"github.com/gordon-deploy/docker-gordon/system/image"
	"github.com/gordon-deploy/docker-gordon/system/swarm"
)

// SwarmStartOptions are system start's settings on a swarm manager.
type SwarmStartOptions struct {
	// NodeID is the manager's node (ChooseSwarm).
	NodeID string
	// Registry is where the edge image is pushed ("": the last start's,
	// or the running edge's).
	Registry string
	// EdgeNodes is "all" or "labelled".
	EdgeNodes string
	// Adopt takes over apps (and the edge) whose manager is still up.
	Adopt bool
	// TCPPorts is the comma-separated list of ports the edge publishes for
	// TCP binds (used when Changed("tcp-ports")).
	TCPPorts string
	// HTTPAddr is the edge's HTTP address (":PORT"); Drain its drain bound.
	HTTPAddr string
	Drain    time.Duration
	// TLS are the edge's HTTPS settings.
	TLS TLSOptions
	// Interval is the reconcile loop's (at most 1 s on a swarm).
	Interval time.Duration
	// Changed reports whether the flag of that name was given now (a
	// flag given wins over the last start's; nil: none was).
	Changed func(flag string) bool
}

func (o *SwarmStartOptions) changed(flag string) bool { return o.Changed != nil && o.Changed(flag) }

// TLSOptions are the edge's HTTPS settings (gordon-edge run's flags).
type TLSOptions struct {
	HTTPSAddr, ACMEEmail, ACMECA, ACMECARoot string
	NoACME                                   bool
}

// SwarmStartResult is what StartSwarm settled: the edge's HTTP address
// and drain bound (an adopted edge's when not given), and whether it got
// past its checks (Ran: the caller remembers the settings then).
type SwarmStartResult struct {
	HTTPAddr string
	Drain    time.Duration
	Ran      bool
}

// ChooseSwarm decides whether system start sets up a swarm: --runtime
// swarm (refused when the engine is not a manager), docker (never), auto
// (when the engine is a swarm manager). nodeID is the manager's.
func ChooseSwarm(ctx context.Context, api client.APIClient, runtime string) (nodeID string, use bool, err error) {
	switch runtime {
	case "docker":
		return "", false, nil
	case "auto", "swarm":
	default:
		return "", false, fmt.Errorf("--runtime %q: want auto, docker or swarm: %w", runtime, core.ErrInvalid)
	}
	id, manager, err := swarm.Manager(ctx, api)
	if err != nil {
		return "", false, err
	}
	if !manager {
		if runtime == "swarm" {
			return "", false, fmt.Errorf("--runtime swarm: this engine is not a swarm manager (docker swarm init, or point --context at a manager); nothing was changed: %w", core.ErrInvalid)
		}
		return "", false, nil
	}
	return id, true, nil
}

// swarmHTTPPort is the host-mode port of --http-addr: the edge publishes
// it on every node's addresses, so only ":PORT" (or "0.0.0.0:PORT") is
// meaningful.
func swarmHTTPPort(addr string) (int, error) { return swarmPort("--http-addr", addr) }

// StartSwarm is system start on a swarm manager: the edge overlay,
// the edge image pushed to the registry, the route-push token, the global
// edge service, swarm.json, then gordon-reconcile on the manager on the
// overlay; it waits until an edge task runs.
func StartSwarm(ctx context.Context, env Env, o SwarmStartOptions) (SwarmStartResult, error) {
	res, err := startSwarm(ctx, env, &o)
	return SwarmStartResult{HTTPAddr: o.HTTPAddr, Drain: o.Drain, Ran: res}, err
}

func startSwarm(ctx context.Context, env Env, o *SwarmStartOptions) (bool, error) {
	out, api, stateDir := env.Out, env.API, env.StateDir
	old, wasSwarm, err := swarm.Load(stateDir)
	if err != nil {
		return false, err
	}
	adopted := false
	if !wasSwarm {
		// Another state directory drove this swarm's edge: its settings
		// are the remembered ones, so the edge keeps its spec (R80).
		if old, adopted, err = adoptedEdgeSettings(ctx, api, o); err != nil {
			return false, err
		}
	}
	if o.Registry == "" && (wasSwarm || adopted) {
		o.Registry = old.Registry // as at the last system start
	}
	_, plan, err := swarmStartChecks(ctx, env, api, o, old, wasSwarm)
	if err != nil {
		return false, err
	}
	port, err := swarmHTTPPort(o.HTTPAddr)
	if err != nil {
		return false, err
	}
	bin, err := env.EdgeBinary()
	if err != nil {
		return false, fmt.Errorf("%w: %w", core.ErrNotFound, err)
	}
	if err := EnsureStateDir(stateDir); err != nil {
		return false, err
	}
	cfg := swarm.Config{Registry: o.Registry, ManagerNode: o.NodeID, HTTPPort: port, Labelled: o.EdgeNodes == "labelled", Drain: o.Drain}
	if wasSwarm || adopted {
		cfg.Network, cfg.Service, cfg.AdminPort, cfg.StateID = old.Network, old.Service, old.AdminPort, old.StateID
	}
	if err := swarmConfigDefaults(&cfg); err != nil {
		return false, err
	}
	caRoot, err := resolveSwarmEdge(o.changed, &cfg, old, o.TLS, o.TCPPorts)
	if err == nil {
		err = refuseUnpublishingBoundPorts(ctx, env, cfg.TCPPorts)
	}
	if err != nil {
		return false, err
	}
	if err := ensureSwarmNetwork(ctx, out, api, cfg.Network); err != nil {
		return false, err
	}
	if cfg.ControlSubnet, err = swarm.ControlSubnet(ctx, api, cfg.Network); err != nil {
		return false, err
	}
	target := strings.TrimSuffix(o.Registry, "/") + "/gordon-edge"
	if cfg.Image, err = pushSwarmEdgeImage(ctx, env, api, bin, o.Registry, target); err != nil {
		return false, err
	}
	ctl, secretID, err := swarmControl(ctx, env, cfg, plan.control)
	if err != nil {
		return false, err
	}
	caID, err := ensureCARoot(ctx, api, cfg, caRoot)
	if err != nil {
		return false, err
	}
	action, err := swarm.EnsureEdgeService(ctx, api, swarm.EdgeService{Config: cfg, ControlSecretID: secretID, ControlSecretName: ctl.SecretName,
		Drain: o.Drain, CARootConfigID: caID}, env.registryAuth(target))
	if err != nil {
		return false, err
	}
	swarm.DropControlSecrets(ctx, api, ctl.SecretName)
	if err := swarm.Save(stateDir, cfg); err != nil {
		return false, fmt.Errorf("swarm configuration: %w", err)
	}
	printEdgeServiceAction(out, cfg, old, wasSwarm, action)
	if err := plan.adopt(env); err != nil {
		return false, err
	}
	// No boot pass on a swarm: Swarm keeps the tasks running through a
	// manager's restart, and boot's Start would hold the routes of apps
	// that serve (an adopting manager's first pass, R80).
	ru, err := SwarmReconcileUnit(stateDir, env.DockerHost, cfg, o.Interval, false)
	if err != nil {
		return false, err
	}
	r, err := docker.Ensure(ctx, api, ru)
	if err != nil {
		return false, err
	}
	PrintStart(out, ru.Name, r)
	return true, awaitSwarmEdge(ctx, env, api, cfg)
}

// swarmStartChecks is what system start on a swarm checks before it
// changes anything: the running edge and its owner (R80), the flags, a
// state directory serving one-engine apps, the apps to adopt, and the
// reconcile container's name.
func swarmStartChecks(ctx context.Context, env Env, api client.APIClient, o *SwarmStartOptions, old swarm.Config, wasSwarm bool) (swarm.RunningEdge, adoption, error) {
	running, err := adoptSwarmEdge(ctx, env, api, o, old, wasSwarm)
	if err != nil {
		return running, adoption{}, err
	}
	if err := checkSwarmStart(*o); err != nil {
		return running, adoption{}, err
	}
	if !wasSwarm {
		if err := refuseOneEngineApps(ctx, env); err != nil {
			return running, adoption{}, err
		}
	}
	ctl, err := recoverControl(ctx, env, api, o, running, wasSwarm)
	if err != nil {
		return running, adoption{}, err
	}
	plan, err := planAdoption(ctx, env, api, o.Adopt, ctl)
	if err != nil {
		return running, adoption{}, err
	}
	if err := docker.CheckFree(ctx, api, docker.ReconcileName, env.StateDir); err != nil {
		return running, adoption{}, fmt.Errorf("%w; nothing was changed", err)
	}
	return running, plan, nil
}

// swarmControl settles the control channel's credentials
// (<state>/edge/control.json): recovered, the record of the state
// directory that drove the running edge (adopted, R80), else this state
// directory's, made when it has none. Their Docker secrets are made: the
// edges' (baked anew after a rotate-token, which replaces each edge task
// once) and the manager-only record.
func swarmControl(ctx context.Context, env Env, cfg swarm.Config, recovered *swarm.Control) (swarm.Control, string, error) {
	stateDir := env.StateDir
	if recovered != nil {
		if _, ok, err := swarm.LoadControl(stateDir); err != nil {
			return swarm.Control{}, "", err
		} else if !ok {
			if err := swarm.SaveControl(stateDir, *recovered); err != nil {
				return swarm.Control{}, "", fmt.Errorf("control credentials: %w", err)
			}
		}
	}
	ctl, err := swarm.EnsureControl(stateDir)
	if err != nil {
		return ctl, "", err
	}
	id, baked, err := swarm.EnsureControlSecret(ctx, env.API, stateDir, &ctl)
	if err != nil {
		return ctl, "", err
	}
	if baked {
		fmt.Fprintf(env.Out, "control credentials: generation %d baked into the edge service's secret %s\n", ctl.Generation, ctl.SecretName)
	}
	if err := swarm.EnsureRecordSecret(ctx, env.API, ctl, cfg.StateID); err != nil {
		return ctl, "", err
	}
	return ctl, id, nil
}

// ensureSwarmNetwork creates the edge's control overlay (attachable) when
// missing.
func ensureSwarmNetwork(ctx context.Context, out io.Writer, api client.APIClient, name string) error {
	if err := swarm.EnsureNetwork(ctx, api, name); err != nil {
		return err
	}
	fmt.Fprintf(out, "network %s: attachable overlay\n", name)
	return nil
}

// swarmConfigDefaults fills a new StateID and the default network,
// service and admin port.
func swarmConfigDefaults(cfg *swarm.Config) error {
	if cfg.StateID == "" {
		id, err := swarm.NewStateID()
		if err != nil {
			return err
		}
		cfg.StateID = id
	}
	if cfg.Network == "" {
		cfg.Network = swarm.DefaultNetwork
	}
	if cfg.Service == "" {
		cfg.Service = swarm.DefaultService
	}
	if cfg.AdminPort == 0 {
		cfg.AdminPort = swarm.DefaultAdminPort
	}
	return nil
}

// pushSwarmEdgeImage builds the edge image from bin and pushes it to the
// registry (target is <registry>/gordon-edge), returning the pinned
// reference every node pulls.
func pushSwarmEdgeImage(ctx context.Context, env Env, api client.APIClient, bin, registry, target string) (string, error) {
	img, err := image.Build(ctx, api, "edge", map[string]string{"/gordon-edge": bin}, map[string]string{docker.LabelManaged: "true", docker.LabelRole: docker.RoleSystem})
	if err != nil {
		return "", fmt.Errorf("edge image: %w", err)
	}
	ref, err := swarm.PushImage(ctx, api, img.Ref, registry, img.Hash, env.registryAuth(target))
	if err != nil {
		return "", err
	}
	fmt.Fprintf(env.Out, "edge image: %s\n", ref)
	return ref, nil
}

// refuseOneEngineApps refuses to turn a state directory that serves apps
// on one engine into a swarm's: their instances are containers, which the
// swarm runtime neither finds nor routes. Removed apps do not count.
func refuseOneEngineApps(ctx context.Context, env Env) error {
	store, err := env.Records()
	if err != nil {
		return err
	}
	apps, err := store.ListApps(ctx)
	if err != nil {
		return err
	}
	var serving []string
	for _, app := range apps {
		if a, err := store.LoadActive(ctx, app); err == nil && len(a.Services) > 0 {
			serving = append(serving, app)
		}
	}
	if len(serving) == 0 {
		return nil
	}
	return fmt.Errorf("the state directory %s serves one-engine apps (%s), and system start on a swarm manager would make it a swarm's: give the swarm its own state directory (--state-dir or GORDON_STATE_DIR), or keep this one on one engine with --runtime docker; nothing was changed: %w",
		env.StateDir, strings.Join(serving, ", "), core.ErrConflict)
}

// checkSwarmStart refuses what a swarm edge cannot do yet, before
// anything changes.
func checkSwarmStart(o SwarmStartOptions) error {
	switch {
	case o.Registry == "":
		return fmt.Errorf("on a swarm every node pulls the edge's image from a registry: pass --registry HOST[:PORT] (one the nodes can pull from), or --runtime docker to run the edge on this engine only; nothing was changed: %w", core.ErrInvalid)
	case o.EdgeNodes != "all" && o.EdgeNodes != "labelled":
		return fmt.Errorf("--edge-nodes %q: want all or labelled: %w", o.EdgeNodes, core.ErrInvalid)
	}
	return nil
}

// SwarmReconcileUnit is gordon-reconcile on the manager, on the edge
// overlay (it re-routes rescheduled tasks: their new IPs are pushed to
// every edge), polling every interval (default 1 s on a swarm: Swarm has
// no task events). With HTTPS it also serves the edges' shared certificate
// storage on the overlay (swarm.CertStoragePort).
func SwarmReconcileUnit(stateDir, dockerHost string, cfg swarm.Config, interval time.Duration, boot bool) (docker.Unit, error) {
	if interval <= 0 || interval > time.Second {
		interval = time.Second
	}
	u, err := ReconcileUnit(stateDir, dockerHost, ReconcileOptions{Interval: interval, Boot: boot})
	if err != nil {
		return u, err
	}
	u.Network = cfg.Network
	if cfg.HTTPSPort > 0 {
		// On its control-network address only: the container also joins
		// the apps' networks, for its probes.
		u.Cmd = append(u.Cmd, "--cert-storage-addr", cfg.ControlSubnet+":"+strconv.Itoa(swarm.CertStoragePort))
	}
	u.Env = append(u.Env, EnvOnEdgeNetwork+"=1", swarm.EnvEdgeNetwork+"="+cfg.Network, swarm.EnvEdgeService+"="+cfg.Service)
	return u, nil
}

// awaitSwarmEdge waits (printing progress, at most 2 minutes without any)
// until every edge task runs and Swarm has finished rolling an update of
// the service out, then lists where the edge runs.
func awaitSwarmEdge(ctx context.Context, env Env, api client.APIClient, cfg swarm.Config) error {
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for {
		tasks, err := swarm.EdgeTasks(ctx, api, cfg.Service, cfg.Network)
		if err != nil {
			return err
		}
		updating, ustate, err := swarm.EdgeUpdating(ctx, api, cfg.Service)
		if err != nil {
			return err
		}
		running, states := 0, []string{}
		for _, t := range tasks {
			st := t.NodeName + " " + t.State
			if !t.Current {
				st += " (previous spec)"
				updating = true
			}
			states = append(states, st)
			if t.Running() {
				running++
			}
		}
		line := strings.Join(states, ", ")
		if running > 0 && running == len(tasks) && !updating {
			fmt.Fprintf(env.Out, "%s: running on %d node(s): %s\n", cfg.Service, running, line)
			return nil
		}
		if updating {
			line = "update " + cmp.Or(ustate, "starting") + ": " + line
		}
		if line != last {
			fmt.Fprintf(env.Err, "waiting for the edge tasks: %s\n", orDash(line))
			last, deadline = line, time.Now().Add(2*time.Minute)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the edge service %s has %d of %d task(s) running, unchanged for 2 minutes (%s): see docker service ps %s: %w",
				cfg.Service, running, len(tasks), orDash(line), cfg.Service, core.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// StopSwarm is system stop on a swarm: gordon-reconcile, the edge
// service; swarm.json stays (apps keep their runtime; system start brings
// the edge back).
func StopSwarm(ctx context.Context, env Env, keepEdge bool) error {
	if err := StopContainer(ctx, env, docker.ReconcileName, 30*time.Second); err != nil {
		return err
	}
	cfg, _, err := swarm.Load(env.StateDir)
	if err != nil {
		return err
	}
	if keepEdge {
		fmt.Fprintf(env.Out, "%s: left serving (system start --adopt on another manager takes it over)\n", cfg.Service)
		return nil
	}
	if err := swarm.CheckOwner(ctx, env.API, cfg); errors.Is(err, core.ErrConflict) {
		fmt.Fprintf(env.Out, "%s: left serving: another state directory drives it now\n", cfg.Service)
		return nil
	} else if err != nil {
		return err
	}
	found, err := swarm.RemoveEdgeService(ctx, env.API, cfg.Service)
	if err != nil {
		return err
	}
	if found {
		fmt.Fprintf(env.Out, "%s: service removed (each task drains for its stop grace)\n", cfg.Service)
	} else {
		fmt.Fprintf(env.Out, "%s: not running\n", cfg.Service)
	}
	return nil
}

// StopContainer stops and removes the system container name of the
// state directory (within grace) and says so.
func StopContainer(ctx context.Context, env Env, name string, grace time.Duration) error {
	found, err := docker.Stop(ctx, env.API, name, env.StateDir, grace)
	if err != nil {
		return err
	}
	if found {
		fmt.Fprintf(env.Out, "%s: stopped and removed\n", name)
	} else {
		fmt.Fprintf(env.Out, "%s: not running\n", name)
	}
	return nil
}
