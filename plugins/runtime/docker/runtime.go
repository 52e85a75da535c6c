// Package docker implements core.Runtime (SPEC 1.3, ARCHITECTURE §4) against
// a real Docker engine through github.com/moby/moby/client.
//
// API versions. The client (moby/client v0.6.2) speaks API 1.40 (its
// MinAPIVersion) up to 1.56 and negotiates: on first use Runtime pings the
// engine and downgrades to the engine's version, so Docker 20.10 (API 1.41)
// and newer work. An engine older than 1.40 is refused with a clear
// ErrUnavailable error naming both versions. A fixed version (Options.
// APIVersion or DOCKER_API_VERSION) disables negotiation; "1.41" is known to
// work against 20.10.
//
// Errors. Every error wraps exactly one core class: a missing container or
// image wraps core.ErrNotFound; an unreachable engine wraps
// core.ErrUnavailable with a hint ("is the Docker engine running? `docker
// info`"); a refused state change (e.g. removing a running container without
// force) wraps core.ErrConflict; a rejected argument wraps core.ErrInvalid;
// anything else the engine reports wraps core.ErrUnavailable.
//
// One engine is one node: ContainerSpec.Node (the manifest's node, which
// pins a service to a swarm node) is accepted and ignored, and a file
// secret's bind mount (Mount.Secret) is bind-mounted like any other.
package docker

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/moby/moby/client"
	"github.com/moby/moby/client/pkg/versions"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

var _ core.Runtime = (*Runtime)(nil)

// Options configures New. The zero value talks to the default local engine
// (unix:///var/run/docker.sock) with API version negotiation.
type Options struct {
	// Host is the engine address ("unix:///var/run/docker.sock",
	// "tcp://127.0.0.1:2376"). Empty: the default local socket.
	Host string
	// APIVersion pins the API version ("1.41") and disables negotiation.
	// Empty: negotiate (the client's maximum, downgraded to the engine's).
	APIVersion string
	// FromEnv applies DOCKER_HOST, DOCKER_API_VERSION, DOCKER_CERT_PATH and
	// DOCKER_TLS_VERIFY first; Host and APIVersion, when set, override them.
	FromEnv bool
}

// Runtime is the Docker implementation of core.Runtime. It is safe for
// concurrent use. Close releases idle connections.
type Runtime struct {
	cli  *client.Client
	host string

	mu        sync.Mutex
	connected bool
	// containerIPs: backends are reached at container IPs (SPEC R18), set
	// by connect; loopbackWhy says why not when false.
	containerIPs bool
	loopbackWhy  string
}

// New returns a Runtime for opts. It does not contact the engine; the first
// call does (and negotiates the API version). Errors: a malformed host or
// version, or unreadable TLS material (wrapping core.ErrInvalid).
func New(opts Options) (*Runtime, error) {
	var ops []client.Opt
	if opts.FromEnv {
		ops = append(ops, client.FromEnv)
	}
	if opts.Host != "" {
		ops = append(ops, client.WithHost(opts.Host))
	}
	if opts.APIVersion != "" {
		ops = append(ops, client.WithAPIVersion(opts.APIVersion))
	}
	cli, err := client.New(ops...)
	if err != nil {
		return nil, fmt.Errorf("docker runtime: client: %w: %w", core.ErrInvalid, err)
	}
	return &Runtime{cli: cli, host: cli.DaemonHost()}, nil
}

// NewFromEnv is New with FromEnv: DOCKER_HOST, DOCKER_API_VERSION,
// DOCKER_CERT_PATH and DOCKER_TLS_VERIFY, as the docker CLI reads them.
func NewFromEnv() (*Runtime, error) {
	return New(Options{FromEnv: true})
}

// Close releases the client's idle connections.
func (r *Runtime) Close() error { return r.cli.Close() }

// Client exposes the underlying moby client (tests, system containers).
func (r *Runtime) Client() *client.Client { return r.cli }

// connect pings the engine once (until it succeeds), negotiating the API
// version, so that an unreachable or too old engine is reported clearly
// rather than as a confusing request error.
func (r *Runtime) connect(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.connected {
		return nil
	}
	ping, err := r.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		if ping.APIVersion != "" && versions.LessThan(ping.APIVersion, client.MinAPIVersion) {
			return fmt.Errorf("docker engine at %s speaks API %s, this build needs at least %s (Docker 19.03+): %w",
				r.host, ping.APIVersion, client.MinAPIVersion, core.ErrUnavailable)
		}
		return r.classify(err, "connect to docker engine")
	}
	r.detectAddressing(ctx)
	r.connected = true
	return nil
}

// APIVersion returns the API version in use (after negotiation, once a
// call has been made).
func (r *Runtime) APIVersion() string { return r.cli.ClientVersion() }

// classify wraps err in exactly one core error class (dockererr.Class),
// with what as context: "<what>: <class>: <engine error>", both the class
// and the engine's error in the chain. An engine that cannot be reached at
// all is named with its address and how to check it.
func (r *Runtime) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	if dockererr.Unreachable(err) {
		return fmt.Errorf("%s: docker engine at %s unreachable (is the Docker engine running? `docker info`): %w: %w",
			what, r.host, core.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %w", what, dockererr.Class(err), err)
}

// Info describes the engine: Name "docker", the server version, the
// server's API version, OS and architecture.
func (r *Runtime) Info(ctx context.Context) (core.RuntimeInfo, error) {
	if err := r.connect(ctx); err != nil {
		return core.RuntimeInfo{}, err
	}
	v, err := r.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return core.RuntimeInfo{}, r.classify(err, "docker version")
	}
	return core.RuntimeInfo{Name: "docker", Version: v.Version, APIVersion: v.APIVersion, OS: v.Os, Arch: v.Arch}, nil
}

// ResolveImage pins ref (decision 15). An image with a registry digest
// resolves to Ref "repo@sha256:…" and Digest "sha256:…" (the RepoDigest of
// ref's repository when there are several); a local image without one
// resolves to Ref = Digest = the image ID ("sha256:…") and Local = true.
// The image's declared VOLUMEs (sorted), STOPSIGNAL and whether it has a
// HEALTHCHECK come with it. A missing image wraps core.ErrNotFound.
func (r *Runtime) ResolveImage(ctx context.Context, ref string) (core.ImageRef, error) {
	if err := r.connect(ctx); err != nil {
		return core.ImageRef{}, err
	}
	img, err := r.cli.ImageInspect(ctx, ref)
	if err != nil {
		return core.ImageRef{}, r.classify(err, fmt.Sprintf("resolve image %q", ref))
	}
	out := core.ImageRef{ID: img.ID}
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
	if rd := pickRepoDigest(ref, img.RepoDigests); rd != "" {
		_, dg, _ := strings.Cut(rd, "@")
		out.Ref, out.Digest = rd, dg
		return out, nil
	}
	out.Ref, out.Digest, out.Local = img.ID, img.ID, true
	return out, nil
}

// pickRepoDigest returns the RepoDigest whose repository matches ref's, else
// the first one, else "".
func pickRepoDigest(ref string, digests []string) string {
	if len(digests) == 0 {
		return ""
	}
	repo := ref
	if i := strings.Index(repo, "@"); i >= 0 {
		repo = repo[:i]
	}
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	for _, d := range digests {
		name, _, _ := strings.Cut(d, "@")
		if name == repo || strings.TrimPrefix(name, "docker.io/library/") == repo || strings.TrimPrefix(name, "docker.io/") == repo {
			return d
		}
	}
	return digests[0]
}

// PullImage pulls ref and waits for the pull to finish, with the registry
// credentials core.WithRegistryAuth put in ctx (anonymous without). A
// registry that refuses the credentials (or wants some) wraps
// core.ErrUnavailable with the registry's message. A registry that
// cannot be reached (or refuses) wraps core.ErrUnavailable; an unknown
// image wraps core.ErrNotFound; a malformed reference wraps core.ErrInvalid.
func (r *Runtime) PullImage(ctx context.Context, ref string) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("pull image %q: %w: %w", ref, core.ErrInvalid, err)
	}
	auth := core.RegistryAuthFrom(ctx)
	resp, err := r.cli.ImagePull(ctx, ref, client.ImagePullOptions{RegistryAuth: auth})
	if err != nil {
		return r.classify(authHint(err, ref, auth), fmt.Sprintf("pull image %q", ref))
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		err = authHint(err, ref, auth)
		if cerrdefs.IsNotFound(err) || strings.Contains(err.Error(), "manifest unknown") {
			return fmt.Errorf("pull image %q: %w: %w", ref, core.ErrNotFound, err)
		}
		return fmt.Errorf("pull image %q: %w: %w", ref, core.ErrUnavailable, err)
	}
	return nil
}

// authHint adds to a registry's refusal what to do about it: log in (no
// credentials were sent) or check the login (they were refused).
func authHint(err error, ref, auth string) error {
	s := strings.ToLower(err.Error())
	if !strings.Contains(s, "unauthorized") && !strings.Contains(s, "authentication required") &&
		!strings.Contains(s, "no basic auth credentials") && !strings.Contains(s, "denied") {
		return err
	}
	host := "the registry"
	if n, perr := reference.ParseNormalizedNamed(ref); perr == nil {
		host = reference.Domain(n)
	}
	if auth == "" {
		return fmt.Errorf("%w (no credentials for %s: run `docker login %s` where docker gordon runs, then retry)", err, host, host)
	}
	return fmt.Errorf("%w (%s refused the credentials of `docker login %s`: check the login and the image's access)", err, host, host)
}

// EnsureNetwork returns the ID of the network named n.Name, creating it
// (bridge driver, n.Labels, n.Internal) when absent: in Docker's default
// address pools, or once those are used up in a free /24 of 172.16.0.0/16
// (createInGordonPool). An existing network is returned as is, whatever
// its labels.
func (r *Runtime) EnsureNetwork(ctx context.Context, n core.NetworkSpec) (string, error) {
	if err := r.connect(ctx); err != nil {
		return "", err
	}
	what := fmt.Sprintf("ensure network %q", n.Name)
	if n.Name == "" {
		return "", fmt.Errorf("%s: %w: empty name", what, core.ErrInvalid)
	}
	if id, err := r.findNetwork(ctx, n.Name); err != nil || id != "" {
		return id, err
	}
	opts := client.NetworkCreateOptions{
		Driver:   "bridge",
		Internal: n.Internal,
		Labels:   n.Labels,
	}
	res, err := r.cli.NetworkCreate(ctx, n.Name, opts)
	if poolsExhausted(err) {
		// Docker's default pools are used up (about 31 networks): a
		// small subnet of our own (subnet.go).
		res, err = r.createInGordonPool(ctx, n.Name, opts)
	}
	if err != nil {
		// Lost a race with a concurrent creator: take theirs.
		if id, ferr := r.findNetwork(ctx, n.Name); ferr == nil && id != "" {
			return id, nil
		}
		return "", r.classify(err, what)
	}
	return res.ID, nil
}

// findNetwork returns the ID of the network with exactly this name, or "".
func (r *Runtime) findNetwork(ctx context.Context, name string) (string, error) {
	res, err := r.cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return "", r.classify(err, fmt.Sprintf("list networks named %q", name))
	}
	for _, nw := range res.Items {
		if nw.Name == name {
			return nw.ID, nil
		}
	}
	return "", nil
}

// EnsureVolume creates the named volume (local driver, v.Labels) when
// absent; an existing volume is kept as is. Nothing here deletes a volume (R3).
func (r *Runtime) EnsureVolume(ctx context.Context, v core.VolumeSpec) error {
	if err := r.connect(ctx); err != nil {
		return err
	}
	what := fmt.Sprintf("ensure volume %q", v.Name)
	if v.Name == "" {
		return fmt.Errorf("%s: %w: empty name", what, core.ErrInvalid)
	}
	_, err := r.cli.VolumeInspect(ctx, v.Name, client.VolumeInspectOptions{})
	if err == nil {
		return nil
	}
	if !cerrdefs.IsNotFound(err) {
		return r.classify(err, what)
	}
	if _, err := r.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v.Name, Labels: v.Labels}); err != nil {
		return r.classify(err, what)
	}
	return nil
}

// labelFilters turns labels into a "label=k=v" filter set.
func labelFilters(labels map[string]string) client.Filters {
	f := make(client.Filters)
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	return f
}
