package swarm

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// Labels on the swarm system objects.
const (
	labelManaged = core.LabelManaged
	labelRole    = core.LabelRole
	roleSystem   = "system"
	// labelConfig is the hash of the edge service's desired spec: a
	// different hash is an update, the same one leaves the service alone.
	labelConfig = "dev.gordon.system-config"
	// labelSystem names the system service ("edge").
	labelSystem = "dev.gordon.system"
)

// Manager returns the ID of the node the API client talks to when that
// engine is a swarm manager; ok is false (err nil) when it is not.
func Manager(ctx context.Context, api client.APIClient) (nodeID string, ok bool, err error) {
	info, err := api.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", false, fmt.Errorf("docker info: %w", dockererr.Classify(err))
	}
	sw := info.Info.Swarm
	return sw.NodeID, sw.ControlAvailable, nil
}

// EnsureNetwork makes the attachable overlay name exist (labelled as a
// gordon system network). A network of that name that is not a
// swarm-scoped overlay wraps core.ErrConflict.
func EnsureNetwork(ctx context.Context, api client.APIClient, name string) error {
	res, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("name", name)})
	if err != nil {
		return fmt.Errorf("list networks: %w", dockererr.Classify(err))
	}
	for _, nw := range res.Items {
		if nw.Name != name {
			continue
		}
		if nw.Driver != "overlay" || nw.Scope != "swarm" || !nw.Attachable {
			return fmt.Errorf("network %q exists as a %s network of scope %s (attachable %v); the swarm edge needs an attachable overlay of that name: remove it or pick another: %w",
				name, nw.Driver, nw.Scope, nw.Attachable, core.ErrConflict)
		}
		return nil
	}
	_, err = api.NetworkCreate(ctx, name, client.NetworkCreateOptions{
		Driver: "overlay", Scope: "swarm", Attachable: true,
		Labels: map[string]string{labelManaged: "true", labelRole: roleSystem},
	})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create the overlay network %q: %w", name, dockererr.Classify(err))
	}
	return nil
}

// PushImage tags the local image localRef as <registry>/gordon-edge:<tag>,
// unless the registry already holds that tag (then its digest is
// returned and nothing is pushed), pushes it with auth (an X-Registry-Auth value, "" for none) and returns
// the pinned reference <registry>/gordon-edge@sha256:… every node pulls.
func PushImage(ctx context.Context, api client.APIClient, localRef, registry, tag, auth string) (string, error) {
	target := strings.TrimSuffix(registry, "/") + "/" + edgeRepo + ":" + tag
	named, err := reference.ParseNormalizedNamed(target)
	if err != nil {
		return "", fmt.Errorf("edge image %q: %w: %w (--registry is host[:port][/path])", target, core.ErrInvalid, err)
	}
	if auth == "" {
		// An engine of API 1.41 refuses a push without the header; "{}"
		// is the anonymous credential the docker CLI sends.
		auth = base64.URLEncoding.EncodeToString([]byte("{}"))
	}
	// The tag is the content hash: when the registry has it (an earlier
	// system start pushed it, maybe another manager's), its digest is
	// the edge's. A build on another engine has another digest, and
	// pushing it would replace every edge task (R80).
	if d, err := api.DistributionInspect(ctx, target, client.DistributionInspectOptions{EncodedRegistryAuth: auth}); err == nil && d.Descriptor.Digest != "" {
		return named.Name() + "@" + d.Descriptor.Digest.String(), nil
	}
	if _, err := api.ImageTag(ctx, client.ImageTagOptions{Source: localRef, Target: target}); err != nil {
		return "", fmt.Errorf("tag %s as %s: %w", localRef, target, dockererr.Classify(err))
	}
	resp, err := api.ImagePush(ctx, target, client.ImagePushOptions{RegistryAuth: auth})
	if err != nil {
		return "", fmt.Errorf("push %s: %w", target, dockererr.Classify(err))
	}
	werr := resp.Wait(ctx)
	_ = resp.Close()
	if werr != nil {
		return "", fmt.Errorf("push %s (every node pulls the edge from that registry; is it reachable from the manager, and logged in with `docker login`?): %w: %w", target, core.ErrUnavailable, werr)
	}
	ins, err := api.ImageInspect(ctx, target)
	if err != nil {
		return "", fmt.Errorf("inspect %s after the push: %w", target, dockererr.Classify(err))
	}
	for _, rd := range ins.RepoDigests {
		if rn, err := reference.ParseNormalizedNamed(rd); err == nil && rn.Name() == named.Name() {
			if c, ok := rn.(reference.Canonical); ok {
				return named.Name() + "@" + c.Digest().String(), nil
			}
		}
	}
	return "", fmt.Errorf("push %s: the engine reports no registry digest for it: %w", target, core.ErrUnavailable)
}

// EdgeService is the desired gordon-edge global service.
type EdgeService struct {
	Config
	// ControlSecretID and ControlSecretName are the Docker secret of the
	// edges' control credentials (Control.SecretData), mounted at
	// ControlSecretPath: never an environment variable, so no `docker
	// inspect` on a node shows a token.
	ControlSecretID, ControlSecretName string
	// Drain is gordon-edge's --shutdown-timeout (0: its default, 30 s).
	Drain time.Duration
	// CARootConfigID is the ID of the Docker config ACME.CARootConfig
	// (EnsureConfig), mounted at CARootPath.
	CARootConfigID string
}

// ControlSecretPath is where an edge task reads its control credentials
// (the Docker secret's file); controlSecretTarget is its name under
// /run/secrets.
const (
	ControlSecretPath   = "/run/secrets/" + controlSecretTarget
	controlSecretTarget = "gordon-control"
)

// hostRoots is where the nodes keep the system CAs: bind-mounted into the
// edge tasks (the image is FROM scratch) when they use a public ACME CA.
const hostRoots = "/etc/ssl/certs"

// edgeSpec is the service: one task per node (or per labelled node), on
// the control overlay with endpoint mode dnsrr (no VIP), HTTP, HTTPS and
// the TCP ports published in host mode on each node, the admin port on
// its address on the control overlay only (the app overlays it joins,
// EnsureEdgeService, are not in the spec hash), state and temp on tmpfs (a task's route table comes from
// the push or from its peers; its certificates from gordon-reconcile's
// storage), restart on any exit.
func edgeSpec(e EdgeService) swarm.ServiceSpec {
	drain := e.Drain
	if drain <= 0 {
		drain = 30 * time.Second
	}
	grace := drain + 5*time.Second
	var constraints []string
	if e.Labelled {
		constraints = append(constraints, "node.labels."+EdgeNodeLabel+"==true")
	}
	labels := map[string]string{labelManaged: "true", labelRole: roleSystem, labelSystem: "edge"}
	cs := &swarm.ContainerSpec{
		Image:           e.Image,
		Command:         []string{"/gordon-edge"},
		Args:            edgeArgs(e),
		Env:             []string{"TMPDIR=/tmp"},
		Labels:          labels,
		StopGracePeriod: &grace,
		Mounts: []mount.Mount{
			{Type: mount.TypeTmpfs, Target: "/state"},
			{Type: mount.TypeTmpfs, Target: "/tmp"},
		},
	}
	if e.ControlSecretName != "" {
		cs.Secrets = []*swarm.SecretReference{{SecretID: e.ControlSecretID, SecretName: e.ControlSecretName,
			File: &swarm.SecretReferenceFileTarget{Name: controlSecretTarget, UID: "0", GID: "0", Mode: 0o400}}}
	}
	if e.HTTPSPort > 0 && !e.ACME.Off {
		if e.ACME.CARootConfig != "" {
			cs.Configs = []*swarm.ConfigReference{{
				File:     &swarm.ConfigReferenceFileTarget{Name: CARootPath, UID: "0", GID: "0", Mode: 0o444},
				ConfigID: e.CARootConfigID, ConfigName: e.ACME.CARootConfig,
			}}
		} else {
			cs.Mounts = append(cs.Mounts, mount.Mount{Type: mount.TypeBind, Source: hostRoots, Target: hostRoots, ReadOnly: true})
		}
	}
	spec := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: e.Service, Labels: labels},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: cs,
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionAny},
			Placement:     &swarm.Placement{Constraints: constraints},
			Networks:      []swarm.NetworkAttachmentConfig{{Target: e.Network}},
		},
		Mode:         swarm.ServiceMode{Global: &swarm.GlobalService{}},
		EndpointSpec: &swarm.EndpointSpec{Mode: swarm.ResolutionModeDNSRR, Ports: edgePorts(e.Config)},
	}
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(spec)
	spec.Labels[labelConfig] = hex.EncodeToString(h.Sum(nil))[:16]
	// Which state directory drives the edges: on the service only, out
	// of the hash, so a takeover (R80) replaces no task.
	if e.StateID != "" {
		spec.Labels = maps.Clone(spec.Labels)
		spec.Labels[LabelStateOwner], spec.Labels[LabelStateNode] = e.StateID, e.ManagerNode
	}
	return spec
}

// edgeArgs is gordon-edge's command line in every task.
func edgeArgs(e EdgeService) []string {
	args := []string{"run", "--state-dir", "/state",
		"--http-addr", ":" + strconv.Itoa(e.HTTPPort),
		"--admin-addr", cmp.Or(e.ControlSubnet, "0.0.0.0") + ":" + strconv.Itoa(e.AdminPort),
		"--peers", "tasks." + e.Service,
		"--control-file", ControlSecretPath,
		// A task on a lost node answers no SYN: give up on it after 1 s
		// (not the default 5 s) and retry the request on another.
		"--dial-timeout", "1s"}
	if e.Drain > 0 {
		args = append(args, "--shutdown-timeout", e.Drain.String())
	}
	if e.HTTPSPort == 0 {
		return args
	}
	args = append(args, "--https-addr", ":"+strconv.Itoa(e.HTTPSPort), "--cert-storage", CertStorageURL)
	if e.ACME.Off {
		return append(args, "--acme=false")
	}
	if e.ACME.Email != "" {
		args = append(args, "--acme-email", e.ACME.Email)
	}
	if e.ACME.CA != "" {
		args = append(args, "--acme-ca", e.ACME.CA)
	}
	if e.ACME.CARootConfig != "" {
		args = append(args, "--acme-ca-root", CARootPath)
	}
	return args
}

// edgePorts are the host-mode ports of every edge task: HTTP, HTTPS (when
// set), then each TCP port, each on the same port in the task.
func edgePorts(c Config) []swarm.PortConfig {
	ports := []int{c.HTTPPort}
	if c.HTTPSPort > 0 {
		ports = append(ports, c.HTTPSPort)
	}
	ports = append(ports, c.TCPPorts...)
	out := make([]swarm.PortConfig, 0, len(ports))
	for _, p := range ports {
		out = append(out, swarm.PortConfig{Protocol: network.TCP, TargetPort: uint32(p), PublishedPort: uint32(p), PublishMode: swarm.PortConfigPublishModeHost})
	}
	return out
}

// EnsureConfig makes the Docker config name exist with data (labelled as
// a gordon system object) and returns its ID. The name is
// content-addressed (CARootConfigName), so an existing one is reused.
func EnsureConfig(ctx context.Context, api client.APIClient, name string, data []byte) (string, error) {
	if res, err := api.ConfigInspect(ctx, name, client.ConfigInspectOptions{}); err == nil && res.Config.Spec.Name == name {
		return res.Config.ID, nil
	}
	res, err := api.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
		Annotations: swarm.Annotations{Name: name, Labels: map[string]string{labelManaged: "true", labelRole: roleSystem}},
		Data:        data,
	}})
	if err != nil {
		return "", fmt.Errorf("create the Docker config %s: %w", name, dockererr.Classify(err))
	}
	return res.ID, nil
}

// ConfigID returns the ID of the Docker config name; a missing one wraps
// core.ErrNotFound.
func ConfigID(ctx context.Context, api client.APIClient, name string) (string, error) {
	res, err := api.ConfigInspect(ctx, name, client.ConfigInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("the Docker config %s: %w", name, dockererr.Classify(err))
	}
	return res.Config.ID, nil
}

// EnsureEdgeService creates the edge service, or updates it when its spec
// changed (same spec: left alone). action is "created", "updated" or
// "already running". auth goes with the service so each node can pull.
func EnsureEdgeService(ctx context.Context, api client.APIClient, e EdgeService, auth string) (action string, err error) {
	spec := edgeSpec(e)
	svc, found, err := inspectService(ctx, api, e.Service)
	if err != nil {
		return "", err
	}
	apps, err := AppNetworks(ctx, api)
	if err != nil {
		return "", err
	}
	joined := withAppNetworks(&spec, svc.Spec.TaskTemplate.Networks, apps)
	if !found {
		if _, err := api.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: auth}); err != nil {
			return "", fmt.Errorf("create the edge service %s: %w", e.Service, dockererr.Classify(err))
		}
		return "created", nil
	}
	if svc.Spec.Labels[labelManaged] != "true" || svc.Spec.Labels[labelSystem] != "edge" {
		return "", fmt.Errorf("a service named %s exists and is not gordon's edge: remove it or rename it: %w", e.Service, core.ErrConflict)
	}
	sameTasks := svc.Spec.Labels[labelConfig] == spec.Labels[labelConfig] && joined
	if sameTasks && svc.Spec.Labels[LabelStateOwner] == spec.Labels[LabelStateOwner] && svc.Spec.Labels[LabelStateNode] == spec.Labels[LabelStateNode] {
		return "already running", nil
	}
	if _, err := api.ServiceUpdate(ctx, svc.ID, client.ServiceUpdateOptions{Version: svc.Version, Spec: spec, EncodedRegistryAuth: auth}); err != nil {
		return "", fmt.Errorf("update the edge service %s: %w", e.Service, dockererr.Classify(err))
	}
	if sameTasks {
		return "taken over (its tasks run on)", nil
	}
	return "updated", nil
}

// AppNetworks lists the IDs of the apps' overlays on the swarm (gordon
// managed, labelled with an app), sorted.
func AppNetworks(ctx context.Context, api client.APIClient) ([]string, error) {
	res, err := api.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", labelManaged+"=true").Add("label", core.LabelApp).Add("driver", "overlay")})
	if err != nil {
		return nil, fmt.Errorf("list the apps' networks: %w", dockererr.Classify(err))
	}
	var out []string
	for _, n := range res.Items {
		if n.Scope == "swarm" && n.Labels[core.LabelApp] != "" {
			out = append(out, n.ID)
		}
	}
	sort.Strings(out)
	return out, nil
}

// withAppNetworks adds to spec (after its hash is taken: joining an app's
// network is no change of the edge's settings) every app overlay in apps
// (IDs). It reports whether the running service's networks (Swarm keeps
// IDs) hold every one of them already.
func withAppNetworks(spec *swarm.ServiceSpec, running []swarm.NetworkAttachmentConfig, apps []string) bool {
	on := map[string]bool{}
	for _, n := range running {
		on[n.Target] = true
	}
	all := true
	for _, id := range apps {
		all = all && on[id]
		spec.TaskTemplate.Networks = append(spec.TaskTemplate.Networks, swarm.NetworkAttachmentConfig{Target: id})
	}
	return all
}

// ControlSubnet returns the subnet (CIDR) of the overlay name, waiting
// up to 30 s for Swarm's allocator to give a new one its subnet. None by
// then wraps core.ErrUnavailable.
func ControlSubnet(ctx context.Context, api client.APIClient, name string) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := api.NetworkInspect(ctx, name, client.NetworkInspectOptions{})
		if err != nil {
			return "", fmt.Errorf("inspect the network %s: %w", name, dockererr.Classify(err))
		}
		for _, c := range res.Network.IPAM.Config {
			if c.Subnet.IsValid() {
				return c.Subnet.String(), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the network %s has no subnet after 30 s (docker network inspect %s): %w", name, name, core.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// RemoveEdgeService removes the edge service; found is false when there
// was none.
func RemoveEdgeService(ctx context.Context, api client.APIClient, name string) (found bool, err error) {
	svc, found, err := inspectService(ctx, api, name)
	if err != nil || !found {
		return false, err
	}
	if _, err := api.ServiceRemove(ctx, svc.ID, client.ServiceRemoveOptions{}); err != nil {
		return true, fmt.Errorf("remove the edge service %s: %w", name, dockererr.Classify(err))
	}
	return true, nil
}

func inspectService(ctx context.Context, api client.APIClient, name string) (swarm.Service, bool, error) {
	res, err := api.ServiceInspect(ctx, name, client.ServiceInspectOptions{})
	if err != nil {
		if dockererr.Class(err) == core.ErrNotFound {
			return swarm.Service{}, false, nil
		}
		return swarm.Service{}, false, fmt.Errorf("inspect service %s: %w", name, dockererr.Classify(err))
	}
	if res.Service.Spec.Name != name {
		return swarm.Service{}, false, nil
	}
	return res.Service, true, nil
}

// EdgeTask is one task of the edge service.
type EdgeTask struct {
	ID       string `json:"id"`
	NodeID   string `json:"node_id"`
	NodeName string `json:"node"`
	// NodeReady is the node's state as the manager sees it.
	NodeReady bool `json:"node_ready"`
	// State is the task's state ("running", "starting", …).
	State string `json:"state"`
	// IP is the task's address on the edge overlay ("" before it has one).
	IP string `json:"ip,omitempty"`
	// NodeAddr is the node's address (its published ports answer there).
	NodeAddr string `json:"node_addr,omitempty"`
	// Current reports whether the task runs the service's current spec
	// (false while Swarm rolls an update out and has not replaced it yet).
	Current bool `json:"current"`
}

// Running reports whether the task runs and wants to.
func (t EdgeTask) Running() bool { return t.State == string(swarm.TaskStateRunning) }

// EdgeTasks lists the edge service's tasks that should run (desired state
// running), with their node and their IP on network, sorted by node name.
// A missing service is an empty list.
func EdgeTasks(ctx context.Context, api client.APIClient, service, network string) ([]EdgeTask, error) {
	svc, found, err := inspectService(ctx, api, service)
	if err != nil || !found {
		return nil, err
	}
	tl, err := api.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", svc.ID).Add("desired-state", "running")})
	if err != nil {
		return nil, fmt.Errorf("list the edge's tasks: %w", dockererr.Classify(err))
	}
	nodes := map[string]swarm.Node{}
	if nl, err := api.NodeList(ctx, client.NodeListOptions{}); err == nil {
		for _, n := range nl.Items {
			nodes[n.ID] = n
		}
	}
	var out []EdgeTask
	for _, t := range tl.Items {
		if t.ServiceID != svc.ID || t.DesiredState != swarm.TaskStateRunning {
			continue
		}
		et := EdgeTask{ID: t.ID, NodeID: t.NodeID, State: string(t.Status.State)}
		if cs := t.Spec.ContainerSpec; cs != nil {
			et.Current = cs.Labels[labelConfig] == svc.Spec.Labels[labelConfig]
		}
		if n, ok := nodes[t.NodeID]; ok {
			et.NodeName, et.NodeReady, et.NodeAddr = n.Description.Hostname, n.Status.State == swarm.NodeStateReady, n.Status.Addr
		}
		for _, a := range t.NetworksAttachments {
			if a.Network.Spec.Name != network && a.Network.ID != network {
				continue
			}
			for _, p := range a.Addresses {
				if p.IsValid() {
					et.IP = p.Addr().String()
					break
				}
			}
		}
		out = append(out, et)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeName < out[j].NodeName })
	return out, nil
}

// Node is one swarm node as status shows it.
type Node struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	State   string `json:"state"`
	Ready   bool   `json:"ready"`
	Manager bool   `json:"manager"`
	Addr    string `json:"addr,omitempty"`
}

// String is "n1 ready manager" / "n3 down".
func (n Node) String() string {
	s := n.Name + " " + n.State
	if n.Manager {
		s += " manager"
	}
	return s
}

// Nodes lists the swarm's nodes, sorted by name.
func Nodes(ctx context.Context, api client.APIClient) ([]Node, error) {
	res, err := api.NodeList(ctx, client.NodeListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list swarm nodes: %w", dockererr.Classify(err))
	}
	out := make([]Node, 0, len(res.Items))
	for _, n := range res.Items {
		out = append(out, Node{ID: n.ID, Name: n.Description.Hostname, State: string(n.Status.State),
			Ready: n.Status.State == swarm.NodeStateReady, Manager: n.ManagerStatus != nil, Addr: n.Status.Addr})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// EdgeUpdating reports whether Swarm is still rolling an update of the
// edge service out (replacing each node's task in turn); state is its
// update state. An update Swarm paused (a new task failed) wraps
// core.ErrUnavailable with Swarm's message.
func EdgeUpdating(ctx context.Context, api client.APIClient, name string) (updating bool, state string, err error) {
	svc, found, err := inspectService(ctx, api, name)
	if err != nil || !found || svc.UpdateStatus == nil {
		return false, "", err
	}
	us := svc.UpdateStatus
	switch us.State {
	case swarm.UpdateStateUpdating, swarm.UpdateStateRollbackStarted:
		return true, string(us.State), nil
	case swarm.UpdateStatePaused, swarm.UpdateStateRollbackPaused:
		return false, string(us.State), fmt.Errorf("the update of the edge service %s is %s: %s (docker service ps %s): %w", name, us.State, us.Message, name, core.ErrUnavailable)
	}
	return false, string(us.State), nil
}
