package core

import (
	"context"
	"time"
)

// Runtime is the container backend (SPEC 1.3, ARCHITECTURE §4). It is
// implemented by plugins/runtime/docker, by the gRPC client in plugins/sdk
// and by the fake in core/coretest. Every method that addresses a container
// by ID returns an error wrapping ErrNotFound when the container does not
// exist. IDs are always exact container IDs (R2).
type Runtime interface {
	// Info describes the engine (name, version, API version).
	Info(ctx context.Context) (RuntimeInfo, error)
	// ResolveImage returns the pinned reference of ref: the registry digest
	// when the image has one, else the local image ID (decision 15). A
	// missing image wraps ErrNotFound.
	ResolveImage(ctx context.Context, ref string) (ImageRef, error)
	// PullImage pulls ref; unreachable registries wrap ErrUnavailable.
	PullImage(ctx context.Context, ref string) error
	// EnsureNetwork creates the network when absent and returns its ID.
	EnsureNetwork(ctx context.Context, n NetworkSpec) (string, error)
	// EnsureVolume creates the volume when absent. Nothing ever deletes one (R3).
	EnsureVolume(ctx context.Context, v VolumeSpec) error
	// CreateContainer creates (does not start) a container and returns its ID.
	CreateContainer(ctx context.Context, c ContainerSpec) (string, error)
	// StartContainer starts the exact container.
	StartContainer(ctx context.Context, id string) error
	// StopContainer sends the container's stop signal (ContainerSpec.StopSignal,
	// else the image's, else SIGTERM), then kills after grace (zero = 30 s, R25).
	// Stopping a stopped container succeeds.
	StopContainer(ctx context.Context, id string, grace time.Duration) error
	// RemoveContainer removes the container; force kills a running one first.
	// Volumes are never removed.
	RemoveContainer(ctx context.Context, id string, force bool) error
	// RestartContainer restarts in place with grace.
	RestartContainer(ctx context.Context, id string, grace time.Duration) error
	// InspectContainer returns the container's observed state.
	InspectContainer(ctx context.Context, id string) (ContainerState, error)
	// BackendBinds returns, for each requested container port of the
	// running container id, the endpoint the edge dials (SPEC R18): the
	// container's IP on its primary network (BackendBind.IP, .Network)
	// when the host reaches container IPs, else the 127.0.0.1 host port
	// the runtime published. A port with no endpoint is an error.
	BackendBinds(ctx context.Context, id string, ports []PortSpec) ([]BackendBind, error)
	// Logs streams log lines to fn until the logs end (follow=false), ctx is
	// done, or fn returns an error (which Logs then returns).
	Logs(ctx context.Context, id string, opts LogOptions, fn func(LogLine) error) error
	// ListManaged lists containers (running or not) whose labels include
	// every given label.
	ListManaged(ctx context.Context, labels map[string]string) ([]ContainerState, error)
}

// RuntimeInfo describes the container engine.
type RuntimeInfo struct {
	Name       string `json:"name"`
	Version    string `json:"version"`
	APIVersion string `json:"api_version"`
	OS         string `json:"os,omitempty"`
	Arch       string `json:"arch,omitempty"`
}

// ImageRef is a resolved image.
type ImageRef struct {
	// Ref is what CreateContainer receives: "repo@sha256:…" or the image ID.
	Ref string `json:"ref"`
	// Digest is the registry digest, or the image ID for local images.
	Digest string `json:"digest"`
	// Local is true when the image has no registry digest (decision 15).
	Local bool `json:"local,omitempty"`
	// ID is the engine's image ID ("sha256:…").
	ID string `json:"id"`
	// Volumes are the container paths the image declares with VOLUME,
	// sorted; every one must be mapped by a [[volume]] (no anonymous
	// volume is ever created).
	Volumes []string `json:"volumes,omitempty"`
	// StopSignal is the image's STOPSIGNAL ("" when none).
	StopSignal string `json:"stop_signal,omitempty"`
	// HasHealthcheck says whether the image declares a HEALTHCHECK that is
	// not NONE.
	HasHealthcheck bool `json:"has_healthcheck,omitempty"`
}

// NetworkSpec describes a network to ensure.
type NetworkSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	// Internal networks have no external connectivity.
	Internal bool `json:"internal,omitempty"`
}

// VolumeSpec describes a volume to ensure.
type VolumeSpec struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// ContainerSpec is everything CreateContainer needs (SPEC R17.1).
type ContainerSpec struct {
	// Name: gordon-<app>-<service>-<first 8 of op id> (decision 12).
	Name string `json:"name"`
	// Image is ImageRef.Ref.
	Image string `json:"image"`
	// Command replaces the entrypoint when non-empty and drops the image's
	// arguments (argv; S26). System containers use it; a workload uses
	// Entrypoint and Cmd. Ignored when Entrypoint or Cmd is non-nil.
	Command []string `json:"command,omitempty"`
	// Entrypoint replaces the image's ENTRYPOINT when non-nil (an empty
	// slice clears it, and then the image's CMD is dropped too, as in
	// Docker); Cmd replaces the image's CMD when non-empty.
	Entrypoint []string `json:"entrypoint,omitzero"`
	Cmd        []string `json:"cmd,omitempty"`
	// StopSignal is the container's stop signal ("" = the image's, else
	// SIGTERM); StopContainer and RestartContainer send it (R25).
	StopSignal string `json:"stop_signal,omitempty"`
	// Healthcheck, when non-nil, replaces the image's HEALTHCHECK.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
	// Options are the container keys (user, limits, tmpfs, logging, ...);
	// Options.Labels are ignored (the engine merges them into Labels) and a
	// nil Options.Logging means the engine's default log driver.
	Options  ContainerOptions  `json:"options,omitzero"`
	Env      []string          `json:"env,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Hostname string            `json:"hostname,omitempty"`
	// Network is the app's private network; Aliases apply on it.
	Network string   `json:"network,omitempty"`
	Aliases []string `json:"aliases,omitempty"`
	// ExtraNetworks are shared networks joined before start.
	ExtraNetworks []string `json:"extra_networks,omitempty"`
	// Ports are published on 127.0.0.1 with ephemeral host ports by a
	// runtime whose host cannot reach container IPs (loopback fallback,
	// SPEC R18); otherwise they are reached at the container's IP.
	Ports   []PortSpec `json:"ports,omitempty"`
	Mounts  []Mount    `json:"mounts,omitempty"`
	Devices []string   `json:"devices,omitempty"`
	// StopGrace is recorded as the container's stop timeout.
	StopGrace time.Duration `json:"stop_grace,omitempty"`
	// RestartPolicy: "" (no), "unless-stopped", "always".
	RestartPolicy string `json:"restart_policy,omitempty"`
	// HostNetwork runs the container in the host's network namespace.
	HostNetwork bool `json:"host_network,omitempty"`
	// Node is ServiceSpec.Node: the node the container must run on (a
	// swarm node's hostname or ID; "" = the runtime's choice). The Docker
	// runtime (one engine, one node) accepts and ignores it.
	Node string `json:"node,omitempty"`
}

// Mount kinds.
const (
	MountVolume = "volume"
	MountBind   = "bind"
)

// Mount is one volume or bind mount.
type Mount struct {
	Type     string `json:"type"`
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readonly,omitempty"`
	// Secret, on a bind mount, is the file name of the file secret it
	// delivers (Source is the per-container copy in the state directory,
	// Target /run/secrets/<Secret>). The Docker runtime bind-mounts it; a
	// runtime whose tasks run on other machines (swarm) delivers the
	// file's content its own way (a Docker secret) at Target.
	Secret string `json:"secret,omitempty"`
	// Config: a project file's copy (ConfigFile.StoreName; swarm: a config).
	Config string `json:"config,omitempty"`
}

// Container statuses as the engine reports them.
const (
	StatusCreated    = "created"
	StatusRunning    = "running"
	StatusPaused     = "paused"
	StatusRestarting = "restarting"
	StatusRemoving   = "removing"
	StatusExited     = "exited"
	StatusDead       = "dead"
)

// ContainerState is the observed state of one container.
type ContainerState struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Image  string `json:"image"`
	Status string `json:"status"`
	// StartedAt is the current execution's start time (zero if never started).
	StartedAt time.Time `json:"started_at"`
	// Health is "", starting, healthy or unhealthy; HasHealthcheck says
	// whether the image declares one.
	Health         string `json:"health,omitempty"`
	HasHealthcheck bool   `json:"has_healthcheck,omitempty"`
	// HealthLog is the output of the last health check run ("" when none).
	HealthLog string `json:"health_log,omitempty"`
	ExitCode  int    `json:"exit_code,omitempty"`
	// OOMKilled is true when the engine reports the last exit as a kill by
	// the kernel's out-of-memory handler.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// RestartPolicy is the engine's restart policy of the container: "no"
	// (none), "unless-stopped", "always" or "on-failure"; "" when the
	// runtime does not report it.
	RestartPolicy string `json:"restart_policy,omitempty"`
	// Node is the hostname of the node the instance's current task runs on
	// (a swarm); "" on one engine.
	Node   string            `json:"node,omitempty"`
	Env    []string          `json:"env,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Running reports Status == running.
func (c ContainerState) Running() bool { return c.Status == StatusRunning }

// BackendBind is the endpoint of one container port: IP:HostPort when IP
// is set (the container's address on Network; HostPort then equals
// ContainerPort), else 127.0.0.1:HostPort (a published loopback port).
type BackendBind struct {
	ContainerPort int    `json:"container_port"`
	HostPort      int    `json:"host_port"`
	Protocol      string `json:"protocol"`
	// IP is the container's IPv4 or IPv6 address on Network ("" for a
	// loopback publication).
	IP string `json:"ip,omitempty"`
	// Network is the name of the network IP belongs to.
	Network string `json:"network,omitempty"`
}

// LogOptions selects log lines.
type LogOptions struct {
	// Since: only lines at or after this time (zero = all).
	Since time.Time
	// Tail: only the last Tail lines (0 = all).
	Tail   int
	Follow bool
	// Instance narrows an app's logs to one instance of its service
	// (1-based, as status lists them; 0 = every instance). Only the
	// engine reads it; a runtime ignores it.
	Instance int
}

// LogLine is one line of container output, without the trailing newline.
type LogLine struct {
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"` // stdout or stderr
	Text   string    `json:"text"`
	// Instance is the 1-based instance of the service the line came from,
	// set by the engine when the service runs more than one instance
	// (0 otherwise; a runtime leaves it 0).
	Instance int `json:"instance,omitempty"`
}

// Labels under one reverse-DNS prefix (decision 12).
const (
	LabelPrefix      = "dev.gordon."
	LabelManaged     = LabelPrefix + "managed"
	LabelApp         = LabelPrefix + "app"
	LabelService     = LabelPrefix + "service"
	LabelIncarnation = LabelPrefix + "incarnation"
	LabelOp          = LabelPrefix + "op"
	LabelRevision    = LabelPrefix + "revision"
	LabelRole        = LabelPrefix + "role"      // "workload" or "system"
	LabelPlacement   = LabelPrefix + "placement" // ServiceSpec.Placement, one a line
)
