// Package swarm implements core.Runtime against a Docker Swarm manager
// (ARCHITECTURE §Swarm target) through the moby client.
//
// One instance is one Swarm service: a replicated service named
// ContainerSpec.Name, created with 0 replicas and scaled to 1 to start, to
// 0 to stop. The engine's contract addresses instances by exact ID (R2)
// and withdraws and drains the instance it chose before stopping it. With
// one N-replica service per generation, Swarm, not the engine, would pick
// which task dies on a scale-down, so the edge could not drain it first.
// A generation is therefore the set of services carrying its generation
// labels (dev.gordon.app, .service, .op …), and an instance's ID is its
// service's ID.
//
// Every service has endpoint mode dnsrr and no published port (no ingress
// routing mesh, no VIP: neither works without IP_VS, and the edge must
// reach one task, not a balancer), and no update or rollback config: the
// engine keeps its own overlap, readiness, switch, drain and journal.
// BackendBinds returns the running task's IP on the app's attachable
// overlay: an instance joins no network shared with other apps, and the
// edge service (Options.EdgeService) joins each app's overlay instead
// (edgejoin.go). Images
// are pinned by registry digest on the manager, so every node runs the
// same image; an image with no registry digest is refused.
//
// State (placement.go, secrets.go): an instance with a named volume, a
// bind mount or a named node (ContainerSpec.Node) is pinned to one node
// by a node.id constraint: the named node, else the node recorded for its
// (app, service) at its first placement (<StateDir>/swarm/placement.json
// and the service label dev.gordon.node), else the least loaded ready,
// active node. StartContainer fails, naming the node, when that node is
// lost. File secrets become Docker secrets, one per content, named with a
// keyed MAC of it (never a plain hash), removed with the last service that
// references them.
//
// Errors wrap exactly one core class as the Docker runtime's do
// (dockererr): a missing service or image wraps core.ErrNotFound, a spec
// Swarm cannot run wraps core.ErrInvalid, an unreachable engine or one
// that is not a swarm manager, or a pinned node that is down, wraps
// core.ErrUnavailable.
//
// Volume snapshots (volume_archive.go, volume_helper.go) are read and
// written on the node that holds the volume by a one-shot helper service
// of the edge's image, which sends or receives the tar over TLS on the
// control network (internal/volxfer); only a process in a container on
// that network (the runner, the reconcile loop) can do it.
//
// The stateless instances of one generation are spread over the nodes
// (spread.go); on a node's loss Swarm reschedules them and the CLI's
// reconcile loop routes their new addresses; stopping an instance does not
// wait for a task on a node that is down (docs/swarm.md, "Node loss").
package swarm

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

var _ core.Runtime = (*Runtime)(nil)

// Name is the runtime's name in RuntimeInfo and in the built-in table.
const Name = "swarm"

// Environment NewFromEnv reads (besides the docker CLI's DOCKER_*).
const (
	// EnvEdgeNetwork names the edge's shared attachable overlay
	// (Options.EdgeNetwork), e.g. "gordon-edge".
	EnvEdgeNetwork = "GORDON_SWARM_EDGE_NETWORK"
	// EnvEdgeService names the edge's global service (Options.EdgeService),
	// e.g. "gordon-edge".
	EnvEdgeService = "GORDON_SWARM_EDGE_SERVICE"
	// EnvStateDir is the state directory (Options.StateDir).
	EnvStateDir = "GORDON_STATE_DIR"
)

// Options shape a Runtime beyond its manager's address. The zero value is
// today's behaviour: instances on the app network only, placements
// recorded only as service labels.
type Options struct {
	// EdgeNetwork, when set, is the edge's control overlay (route push,
	// admin, certificate storage), which no instance joins: a process in a
	// container attached to it (the runner, the reconcile loop) connects
	// its own container to each app's overlay for its probes (joinSelf).
	EdgeNetwork string
	// EdgeService, when set, is the edge's global service: each app's
	// overlay is added to its networks at the app's first deploy (joinEdge).
	EdgeService string
	// StateDir, when set, holds the placement record
	// <StateDir>/swarm/placement.json (placement.go).
	StateDir string
	// StartTimeout bounds StartContainer's wait for a running task (zero:
	// DefaultStartTimeout).
	StartTimeout time.Duration
}

// OptionsFromEnv reads GORDON_SWARM_EDGE_NETWORK,
// GORDON_SWARM_EDGE_SERVICE and GORDON_STATE_DIR.
func OptionsFromEnv() Options {
	return Options{EdgeNetwork: strings.TrimSpace(os.Getenv(EnvEdgeNetwork)), EdgeService: strings.TrimSpace(os.Getenv(EnvEdgeService)), StateDir: os.Getenv(EnvStateDir)}
}

// Runtime is the Swarm implementation of core.Runtime. Safe for concurrent
// use.
type Runtime struct {
	cli  *client.Client
	host string
	opts Options

	mu        sync.Mutex
	connected bool
	edgeOK    bool // the edge network was found once
	// spreadMu serializes the spread choice and the create of stateless
	// instances (spread.go), so one generation's creates see each other.
	spreadMu sync.Mutex
	// nodeNames caches node ID → hostname for status (nameNode; under mu).
	nodeNames map[string]string
	// nameKey is the secret names' MAC key (secretNameKey; under mu).
	nameKey []byte
	// edgeJoined and selfJoined are the app networks the edge service
	// and this process's container are known to be on (under mu).
	edgeJoined, selfJoined map[string]bool
}

// New returns a Runtime talking to the manager at host ("" = the default
// local socket), after DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH
// and DOCKER_TLS_VERIFY when fromEnv, with zero Options. Nothing is
// contacted until the first call. A malformed host wraps core.ErrInvalid.
func New(host string, fromEnv bool) (*Runtime, error) {
	return NewWithOptions(host, fromEnv, Options{})
}

// NewWithOptions is New with opts.
func NewWithOptions(host string, fromEnv bool, opts Options) (*Runtime, error) {
	var ops []client.Opt
	if fromEnv {
		ops = append(ops, client.FromEnv)
	}
	if host != "" {
		ops = append(ops, client.WithHost(host))
	}
	cli, err := client.New(ops...)
	if err != nil {
		return nil, fmt.Errorf("swarm runtime: client: %w: %w", core.ErrInvalid, err)
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	return &Runtime{cli: cli, host: cli.DaemonHost(), opts: opts}, nil
}

// NewFromEnv is NewWithOptions("", true, OptionsFromEnv()): the manager
// the docker CLI would talk to.
func NewFromEnv() (*Runtime, error) { return NewWithOptions("", true, OptionsFromEnv()) }

// Close releases the client's idle connections.
func (r *Runtime) Close() error { return r.cli.Close() }

// connect pings the engine once (negotiating the API version) and checks
// that it is a swarm manager.
func (r *Runtime) connect(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.connected {
		return nil
	}
	if _, err := r.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return r.classify(err, "connect to swarm manager")
	}
	info, err := r.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return r.classify(err, "docker info")
	}
	if !info.Info.Swarm.ControlAvailable {
		return fmt.Errorf("the engine at %s is not a swarm manager (swarm state %q): run `docker swarm init`, or point DOCKER_HOST at a manager: %w",
			r.host, info.Info.Swarm.LocalNodeState, core.ErrUnavailable)
	}
	r.connected = true
	return nil
}

// classify wraps err in one core class, with what as context.
func (r *Runtime) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if dockererr.Unreachable(err) {
		return fmt.Errorf("%s: swarm manager at %s unreachable (`docker info`): %w: %w", what, r.host, core.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %w", what, dockererr.Class(err), err)
}

// Info describes the manager's engine: Name "swarm", its version, API
// version, OS and architecture. NodeCount gives the swarm's size.
func (r *Runtime) Info(ctx context.Context) (core.RuntimeInfo, error) {
	if err := r.connect(ctx); err != nil {
		return core.RuntimeInfo{}, err
	}
	v, err := r.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return core.RuntimeInfo{}, r.classify(err, "docker version")
	}
	return core.RuntimeInfo{Name: Name, Version: v.Version, APIVersion: v.APIVersion, OS: v.Os, Arch: v.Arch}, nil
}

// NodeCount returns how many nodes the swarm has and how many of them are
// ready (for "runtime: swarm, 3 nodes").
func (r *Runtime) NodeCount(ctx context.Context) (ready, total int, err error) {
	if err := r.connect(ctx); err != nil {
		return 0, 0, err
	}
	res, err := r.cli.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return 0, 0, r.classify(err, "list swarm nodes")
	}
	for _, n := range res.Items {
		if n.Status.State == swarm.NodeStateReady {
			ready++
		}
	}
	return ready, len(res.Items), nil
}

// ResolveImage pins ref to its registry digest, so every node runs the
// same image: the digest the registry reports to the manager
// (DistributionInspect, with core.WithRegistryAuth's credentials), else a
// RepoDigest of the manager's copy. Ref is "repo@sha256:…"; the image's
// VOLUMEs, STOPSIGNAL and HEALTHCHECK come from the manager's copy when it
// has one (PullImage). An image with no registry digest wraps
// core.ErrInvalid (a missing one core.ErrNotFound), saying to push it to
// a registry the nodes can reach.
func (r *Runtime) ResolveImage(ctx context.Context, ref string) (core.ImageRef, error) {
	if err := r.connect(ctx); err != nil {
		return core.ImageRef{}, err
	}
	what := fmt.Sprintf("resolve image %q", ref)
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return core.ImageRef{}, fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
	}
	out := core.ImageRef{}
	img, ierr := r.cli.ImageInspect(ctx, ref)
	if ierr == nil {
		out.ID = img.ID
		if cfg := img.Config; cfg != nil {
			for v := range cfg.Volumes {
				out.Volumes = append(out.Volumes, v)
			}
			sort.Strings(out.Volumes)
			out.StopSignal = cfg.StopSignal
			if hc := cfg.Healthcheck; hc != nil && len(hc.Test) > 0 && hc.Test[0] != "NONE" {
				out.HasHealthcheck = true
			}
		}
	}
	dist, derr := r.cli.DistributionInspect(ctx, ref, client.DistributionInspectOptions{EncodedRegistryAuth: core.RegistryAuthFrom(ctx)})
	if derr == nil && dist.Descriptor.Digest != "" {
		out.Digest = dist.Descriptor.Digest.String()
	} else if ierr == nil {
		for _, rd := range img.RepoDigests {
			if rn, err := reference.ParseNormalizedNamed(rd); err == nil && rn.Name() == named.Name() {
				if c, ok := rn.(reference.Canonical); ok {
					out.Digest = c.Digest().String()
				}
			}
		}
	}
	if out.Digest == "" {
		switch {
		case ierr != nil && cerrdefs.IsNotFound(ierr):
			return core.ImageRef{}, fmt.Errorf("%s: %w: not on the manager and no registry has it (%v): %s", what, core.ErrNotFound, derr, refusedCopyImages)
		case ierr != nil:
			return core.ImageRef{}, r.classify(ierr, what)
		}
		return core.ImageRef{}, fmt.Errorf("%s: %w: the image has no registry digest (%v): %s", what, core.ErrInvalid, derr, refusedCopyImages)
	}
	out.Ref = reference.TrimNamed(named).String() + "@" + out.Digest
	if out.ID == "" {
		out.ID = out.Digest
	}
	return out, nil
}

// imageHealthcheck is the HEALTHCHECK of image ref as the manager's
// engine has it, nil when it has none or does not have the image (then
// ResolveImage did not report one either, and the engine does not wait
// for a health status).
func (r *Runtime) imageHealthcheck(ctx context.Context, ref string) *container.HealthConfig {
	img, err := r.cli.ImageInspect(ctx, ref)
	if err != nil || img.Config == nil {
		return nil
	}
	return img.Config.Healthcheck
}

// PullImage pulls ref on the manager (so ResolveImage can read the image's
// config there) with core.WithRegistryAuth's credentials; the nodes pull
// it by digest when a task starts. An unknown image wraps core.ErrNotFound,
// an unreachable registry core.ErrUnavailable.
func (r *Runtime) PullImage(ctx context.Context, ref string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("pull image %q on the swarm manager", ref)
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("%s: %w: %w", what, core.ErrInvalid, err)
	}
	resp, err := r.cli.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: core.RegistryAuthFrom(ctx)})
	if err != nil {
		return r.classify(err, what)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		if cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "manifest unknown") {
			return fmt.Errorf("%s: %w: %w", what, core.ErrNotFound, err)
		}
		return fmt.Errorf("%s: %w: %w", what, core.ErrUnavailable, err)
	}
	return nil
}

// EnsureNetwork returns the ID of the swarm network n.Name, creating it
// when absent as an attachable overlay (n.Labels, n.Internal) that tasks on
// every node and the edge's containers can join. An existing network of
// another kind (e.g. a local bridge of that name) wraps core.ErrConflict.
func (r *Runtime) EnsureNetwork(ctx context.Context, n core.NetworkSpec) (string, error) {
	if err := r.connect(ctx); err != nil {
		return "", err
	}
	what := fmt.Sprintf("ensure overlay network %q", n.Name)
	if n.Name == "" {
		return "", fmt.Errorf("%s: %w: empty name", what, core.ErrInvalid)
	}
	id, err := r.findOrCreateOverlay(ctx, n, what)
	if err != nil || n.Labels[core.LabelApp] == "" {
		return id, err
	}
	// An app's own network: the edge and this process reach its
	// instances there (edgejoin.go).
	if err := r.joinEdge(ctx, id, n.Name, what); err != nil {
		return "", err
	}
	return id, r.joinSelf(ctx, id, what)
}

func (r *Runtime) findOrCreateOverlay(ctx context.Context, n core.NetworkSpec, what string) (string, error) {
	find := func() (string, error) { return r.findOverlay(ctx, n.Name, what) }
	if id, err := find(); err != nil || id != "" {
		return id, err
	}
	res, err := r.cli.NetworkCreate(ctx, n.Name, client.NetworkCreateOptions{
		Driver: "overlay", Scope: "swarm", Attachable: true, Internal: n.Internal, Labels: n.Labels,
	})
	if err != nil {
		if id, ferr := find(); ferr == nil && id != "" { // lost a race: take theirs
			return id, nil
		}
		return "", r.classify(err, what)
	}
	return res.ID, nil
}

// findOverlay returns the ID of the swarm overlay named name ("" when
// there is none); a network of another kind with that name wraps
// core.ErrConflict.
func (r *Runtime) findOverlay(ctx context.Context, name, what string) (string, error) {
	res, err := r.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return "", r.classify(err, what)
	}
	for _, nw := range res.Items {
		if nw.Name != name {
			continue
		}
		if nw.Driver != "overlay" || nw.Scope != "swarm" {
			return "", fmt.Errorf("%s: %w: a %s network of scope %s has that name; an app network on a swarm is an attachable overlay",
				what, core.ErrConflict, nw.Driver, nw.Scope)
		}
		return nw.ID, nil
	}
	return "", nil
}

// checkEdgeNetwork checks once that Options.EdgeNetwork exists as a swarm
// overlay (the CLI's system start creates it); absent wraps
// core.ErrUnavailable, saying what to do.
func (r *Runtime) checkEdgeNetwork(ctx context.Context, what string) error {
	r.mu.Lock()
	ok := r.edgeOK
	r.mu.Unlock()
	if r.opts.EdgeNetwork == "" || ok {
		return nil
	}
	id, err := r.findOverlay(ctx, r.opts.EdgeNetwork, what)
	if err != nil {
		return err
	}
	if id == "" {
		return fmt.Errorf("%s: %w: the edge network %q (%s) does not exist on the swarm: start the edge (docker gordon system start creates it) or unset %s",
			what, core.ErrUnavailable, r.opts.EdgeNetwork, EnvEdgeNetwork, EnvEdgeNetwork)
	}
	r.mu.Lock()
	r.edgeOK = true
	r.mu.Unlock()
	return nil
}

// EnsureVolume only checks the name: a named volume lives on one node, and
// Swarm has the engine of the node a task lands on create it at the
// task's start (labelled with the instance's managed and app labels,
// serviceSpec). Creating it on the manager would make a volume the task
// may never use. Nothing deletes a volume (R3).
func (r *Runtime) EnsureVolume(_ context.Context, v core.VolumeSpec) error {
	if v.Name == "" {
		return fmt.Errorf("ensure volume: %w: empty name", core.ErrInvalid)
	}
	return nil
}

// ListManaged lists the instances (services, running or not) whose labels
// include every given label, with their current task's state. Services
// that vanish between the two lists are skipped.
func (r *Runtime) ListManaged(ctx context.Context, labels map[string]string) ([]core.ContainerState, error) {
	if err := r.connect(ctx); err != nil {
		return nil, err
	}
	f := make(client.Filters)
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	res, err := r.cli.ServiceList(ctx, client.ServiceListOptions{Filters: f})
	if err != nil {
		return nil, r.classify(err, "list managed services")
	}
	out := make([]core.ContainerState, 0, len(res.Items))
	for _, svc := range res.Items {
		tasks, err := r.tasks(ctx, svc.ID)
		if err != nil {
			if cerrdefs.IsNotFound(err) {
				continue
			}
			return nil, r.classify(err, fmt.Sprintf("list tasks of service %s", short(svc.ID)))
		}
		st := stateOf(svc, tasks)
		r.nameNode(ctx, &st)
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveNetwork removes the swarm network with exactly this name (SPEC
// R55's reclaim, core.NetworkRemover); an absent network is success. A
// network some service or container still uses is refused by the engine
// (its error, classified; the engine keeps it with a warning).
func (r *Runtime) RemoveNetwork(ctx context.Context, name string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("remove overlay network %q", name)
	res, err := r.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return r.classify(err, what)
	}
	for _, nw := range res.Items {
		if nw.Name != name || nw.Scope != "swarm" {
			continue
		}
		if nw.Labels[core.LabelApp] != "" {
			if err := r.leaveApp(ctx, nw.ID, name, what); err != nil {
				return err
			}
		}
		if _, err := r.cli.NetworkRemove(ctx, nw.ID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			return r.classify(err, what)
		}
	}
	return nil
}
