package core

import "strconv"

// AppSpec is the normalized, validated form of one manifest (ARCHITECTURE §8).
// It is what a Revision pins. Services are sorted by Name; maps are never nil
// after normalization by the manifest loader.
type AppSpec struct {
	// Name is the app name, a DNS label (required).
	Name string `json:"name"`
	// Env is the app-wide public environment; a service's own Env overrides it.
	Env map[string]string `json:"env,omitempty"`
	// Services, ascending by name (at least one).
	Services []ServiceSpec `json:"services"`
	// Networks are shared networks every service joins (optional).
	Networks []string `json:"networks,omitempty"`
	// Registry ("host[:port]/prefix"), when set, is where the CLI pushes
	// the images it builds; it is not journaled (the revision names the
	// pushed image by digest).
	Registry string `json:"-"`
	// Notify is where operation outcomes are sent (optional, [notify]).
	Notify *NotifySpec `json:"notify,omitempty"`
	Jobs   []JobSpec   `json:"jobs,omitempty"` // [jobs.NAME], by name
}

// JobSpec is [jobs.NAME]: Command (argv) run on Schedule in a new container
// of Service's serving generation within Timeout (core/engine/jobs).
type JobSpec struct {
	Name     string   `json:"name"`
	Service  string   `json:"service"`
	Schedule string   `json:"schedule"`
	Command  []string `json:"command"`
	Timeout  Duration `json:"timeout,omitempty"`
}

// NotifySpec is the manifest's [notify] table.
type NotifySpec struct {
	// Webhook is an http(s) URL without user info; one JSON document per
	// operation outcome is POSTed to it (engine.Notification).
	Webhook string `json:"webhook"`
}

// Service returns the service named name and true, or false when absent.
func (a *AppSpec) Service(name string) (*ServiceSpec, bool) {
	for i := range a.Services {
		if a.Services[i].Name == name {
			return &a.Services[i], true
		}
	}
	return nil, false
}

// ServiceSpec is one service of an app (SPEC 1.1 "Service").
type ServiceSpec struct {
	Name string `json:"name"`
	// Image is the reference as written in the manifest (tag or digest).
	Image string `json:"image"`
	// Build, when set, says how the CLI builds the image before the
	// revision is stored (R12); it is never journaled (see BuildSpec).
	Build *BuildSpec `json:"-"`
	// Entrypoint replaces the image's ENTRYPOINT (argv, no shell), as
	// compose's entrypoint: nil keeps the image's; an empty, non-nil slice
	// clears it.
	Entrypoint []string `json:"entrypoint,omitzero"`
	// Command replaces the image's CMD (argv, no shell), as compose's
	// command and docker run's arguments: nil keeps the image's CMD; an
	// empty, non-nil slice clears it. The image's ENTRYPOINT still runs
	// unless Entrypoint is set.
	Command []string `json:"command,omitzero"`
	// StopGrace: stop signal to SIGKILL; 1s..5m; zero: 30 s (R25).
	StopGrace Duration `json:"stop_grace,omitempty"`
	// StopSignal asks a container to stop, normalized to "SIGxxx" ("SIGQUIT",
	// "SIGRTMIN+3"); "": the image's STOPSIGNAL, else SIGTERM (R25).
	StopSignal string `json:"stop_signal,omitempty"`
	// Healthcheck sets Docker's healthcheck on the container (compose's
	// healthcheck); nil keeps the image's HEALTHCHECK.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
	// DependsOn names the services of the same app deployed, started and
	// restarted before this one (sorted, unique, no cycles).
	DependsOn []string `json:"depends_on,omitempty"`
	// Container holds the container keys (user, limits, logging, ...).
	Container ContainerOptions `json:"container,omitzero"`
	// Env is this service's public environment (overrides AppSpec.Env).
	Env map[string]string `json:"env,omitempty"`
	// Secrets are resolved from the state directory at deploy time (decision 13).
	Secrets []SecretRef `json:"secrets,omitempty"`
	// HTTP interfaces: public (Host set) or internal (no Host).
	HTTP []HTTPInterface `json:"http,omitempty"`
	// TCP interfaces: the edge listens on Publish and relays to Port.
	TCP []L4Interface `json:"tcp,omitempty"`
	// UDP interfaces: as TCP; any UDP interface forces the sequential flow (R16).
	UDP []L4Interface `json:"udp,omitempty"`
	// Readiness is the declared check; Type "" or "none" means implicit (R29).
	Readiness Readiness `json:"readiness"`
	// Volumes are named volumes, retained across deploys and removal (R3).
	Volumes []VolumeMount `json:"volumes,omitempty"`
	// Binds are operator-approved host paths.
	Binds []BindMount `json:"binds,omitempty"`
	// Configs are project files, one per file, sorted by Path.
	Configs []ConfigFile `json:"configs,omitempty"`
	// Devices are host device paths (exclusive: force the sequential flow).
	Devices []string `json:"devices,omitempty"`
	// Replace: "" (overlap when eligible, R16), ReplaceOverlap (the same; an
	// ineligible service is refused) or ReplaceSequential (never overlap).
	Replace string `json:"replace,omitempty"`
	// Run is "" (kept running) or RunOnce (a one-shot each deploy runs to
	// completion before its dependents; never published, routed or restarted).
	Run string `json:"run,omitempty"`
	// Replicas is how many instances run at once (manifest replicas, compose
	// deploy.replicas or scale; 0 and 1 mean one). More than one needs an
	// overlap-eligible long-running service; the edge balances over them.
	Replicas int `json:"replicas,omitempty"`
	// Node pins the service to one node of a multi-node runtime (manifest
	// node, compose x-gordon.node): a swarm node's hostname or ID. Its
	// volumes live there, and a bind mount names a path there. A one-engine
	// runtime has one node and ignores it.
	Node      string   `json:"node,omitempty"`
	Placement []string `json:"placement,omitempty"` // swarm constraints ("node.role==worker"); one engine: none
	// Aliases are extra names other services reach this one by on the app
	// network, besides its service name (manifest aliases, compose
	// container_name and networks.<net>.aliases).
	Aliases []string `json:"aliases,omitempty"`
	// Hooks are the commands run in the service's containers around the
	// switch, after start and before stop (SPEC R72); nil runs none.
	Hooks *Hooks `json:"hooks,omitempty"`
	// Monitor is SPEC R76's post-switch watch (nil: none).
	Monitor               *Monitor `json:"monitor,omitempty"`
	SnapshotsBeforeDeploy string   `json:"snapshots_before_deploy,omitempty"` // [services.X.snapshots], see snapshot.Policy
	SnapshotsKeep         int      `json:"snapshots_keep,omitempty"`
	SleepAfter            Duration `json:"sleep_after,omitempty"`     // SPEC R81: idle time before it sleeps (0: never)
	WakeIgnore            []string `json:"wake_ignore,omitempty"`     // SPEC R81: request paths that do not wake it
	BackupEvery           Duration `json:"backup_every,omitempty"`    // [services.X.backup] (docs/data.md): every,
	BackupSchedule        string   `json:"backup_schedule,omitempty"` // or a cron schedule; BackupKeep of them kept
	BackupKeep            int      `json:"backup_keep,omitempty"`
	BackupCommand         []string `json:"backup_command,omitempty"` // an online dump's argv, and its bound
	BackupTimeout         Duration `json:"backup_timeout,omitempty"` // (0: snapshot.DefaultDumpTimeout)
}

// Monitor is [services.X.monitor] (SPEC R76; see the engine's monitor).
type Monitor struct {
	Window       Duration `json:"window"`         // 10s..30m
	MaxErrorRate float64  `json:"max_error_rate"` // 0..1, errors/requests
	MinRequests  int64    `json:"min_requests"`   // >= 1 before a rate counts
}

// Instances is the number of instances the service runs (Replicas, at
// least 1).
func (s *ServiceSpec) Instances() int {
	if s.Replicas < 1 {
		return 1
	}
	return s.Replicas
}

// MaxReplicas bounds ServiceSpec.Replicas.
const MaxReplicas = 100

// RunOnce marks a one-shot service (ServiceSpec.Run).
const RunOnce = "once"

// Declared replacement flows (ServiceSpec.Replace).
const (
	ReplaceOverlap    = "overlap"
	ReplaceSequential = "sequential"
)

// SecretRef names one secret a service receives.
type SecretRef struct {
	// Env is the environment variable (As "env") or the file name under
	// /run/secrets (As "file").
	Env string `json:"env"`
	// Name is the secret's name under secrets/<incarnation>/<service>/.
	Name string `json:"name"`
	// As is "env" (default) or "file".
	As string `json:"as,omitempty"`
}

// Visibility of an HTTP interface.
const (
	VisibilityPublic   = "public"
	VisibilityInternal = "internal"
)

// HTTPInterface is one HTTP port of a service.
type HTTPInterface struct {
	Port int `json:"port"`
	// Host is the public host name ("*.example.com" allowed); empty for internal.
	Host       string `json:"host,omitempty"`
	Visibility string `json:"visibility"`
	// ResponseTimeout bounds the edge's wait for response headers (1s..1h;
	// 0: the edge's default, 60 s); exceeding it answers 504.
	ResponseTimeout Duration `json:"response_timeout,omitempty"`
	// TLS is the HTTPS policy (R62): "" or TLSAuto, TLSAlways, TLSNever.
	TLS string `json:"tls,omitempty"`
	// Protocol is how the edge speaks to the backend: "" or ProtocolHTTP1
	// (HTTP/1.1), ProtocolH2C (cleartext HTTP/2, trailers included).
	Protocol string `json:"protocol,omitempty"`
	// HSTS is the Strict-Transport-Security value the edge sends on the
	// interface's HTTPS answers (R62; "": none).
	HSTS string `json:"hsts,omitempty"`
	// BasicAuth are htpasswd bcrypt lines "user:$2y$..." (access.ParseBasicAuth):
	// the edge answers 401 to a request without the credentials of one.
	BasicAuth []string `json:"basic_auth,omitempty"`
	// Allow are CIDRs or IPs (manifest allow; access.ParseAllow): the
	// edge answers 403 to a client outside all of them.
	Allow []string `json:"allow,omitempty"`
}

// HTTPS policies of a public HTTP interface (R62).
const (
	TLSAuto   = "auto"
	TLSAlways = "always"
	TLSNever  = "never"
)

// Backend protocols of a public HTTP interface.
const (
	ProtocolHTTP1 = "http1"
	ProtocolH2C   = "h2c"
)

// Public reports whether the interface is routed from a host name.
func (h HTTPInterface) Public() bool { return h.Visibility == VisibilityPublic }

// L4Interface is one TCP or UDP port of a service.
type L4Interface struct {
	Port int `json:"port"`
	// Publish is the edge's listen address, "IP:port" (e.g. "0.0.0.0:9000").
	Publish string `json:"publish,omitempty"`
	// IdleTimeout closes a relayed TCP connection, or ends a UDP session,
	// silent both ways this long (manifest idle_timeout, 1s..24h; 0: the
	// edge's default, 50 s for TCP, 30 s for UDP).
	IdleTimeout Duration `json:"idle_timeout,omitempty"`
	// MaxConns bounds the interface's relayed TCP connections or UDP
	// sessions at once (manifest max_conns, 1..100000; 0: the edge's
	// default, 2000 for TCP, 4096 for UDP).
	MaxConns int `json:"max_conns,omitempty"`
}

// Readiness types (R29).
const (
	ReadinessNone   = "none"
	ReadinessHTTP   = "http"
	ReadinessTCP    = "tcp"
	ReadinessLog    = "log"
	ReadinessPlugin = "plugin"
	// ReadinessDocker waits for Docker's health status "healthy" and fails
	// at once on "unhealthy".
	ReadinessDocker = "docker"
)

// Readiness is a service's declared readiness check (ARCHITECTURE §8).
type Readiness struct {
	// Type: "", none, http, tcp, log, plugin or docker.
	Type string `json:"type,omitempty"`
	// Path: HTTP origin-form path (default "/").
	Path string `json:"path,omitempty"`
	// Port: container port to probe (default: R30).
	Port int `json:"port,omitempty"`
	// Host overrides the HTTP probe's Host header (decision 9).
	Host string `json:"host,omitempty"`
	// Pattern: the substring a log probe waits for (R34).
	Pattern string `json:"pattern,omitempty"`
	// Plugin names a custom probe plugin (gordon-probe-<plugin>).
	Plugin string `json:"plugin,omitempty"`
	// Config is passed verbatim to a custom probe plugin.
	Config map[string]any `json:"config,omitempty"`
	// Timeout is the whole readiness budget; 1s..10m; zero = 30 s (R35).
	Timeout Duration `json:"timeout,omitempty"`
}

// VolumeMount mounts a named volume.
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readonly,omitempty"`
	// Adopt takes over an existing volume of this name owned by another
	// app or incarnation (or by none) instead of refusing it (R13).
	Adopt bool `json:"adopt,omitempty"`
}

// BindMount mounts an operator-approved host path, looked up by Name in the
// bind policy (<state>/config.toml).
type BindMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readonly,omitempty"`
}

// ConfigFile is one project file a service receives read-only (SPEC R82).
type ConfigFile struct {
	Source string `json:"source"` // relative to the manifest's directory
	Path   string `json:"path"`   // absolute, clean, in the container
	Mode   uint32 `json:"mode"`   // read (and execute) bits, never write
	Digest string `json:"digest"` // hex sha256 of the content
	Data   []byte `json:"-"`      // never journaled: stored by StoreName
}

// StoreName is the file's content-addressed name "<digest>-<octal mode>".
func (c ConfigFile) StoreName() string {
	return c.Digest + "-" + strconv.FormatUint(uint64(c.Mode), 8)
}

// OverlapEligible reports SPEC R16 overlapEligible(spec): no volumes, no
// binds, no devices and no UDP interface.
func (s *ServiceSpec) OverlapEligible() bool {
	return len(s.Volumes) == 0 && len(s.Binds) == 0 && len(s.Devices) == 0 && len(s.UDP) == 0
}

// SingleWriter reports SPEC 1.1 "single-writer": at least one volume or bind.
func (s *ServiceSpec) SingleWriter() bool { return len(s.Volumes) > 0 || len(s.Binds) > 0 }

// CanOverlap is SPEC R16 canOverlap(new, previous): both eligible, and the
// new spec does not declare the sequential flow.
func CanOverlap(next, previous *ServiceSpec) bool {
	return next != nil && previous != nil && next.Replace != ReplaceSequential && next.OverlapEligible() && previous.OverlapEligible()
}

// NotOverlapEligible names the first reason s is not overlap-eligible
// (R16): "single-writer: volume data", "exclusive device /dev/x",
// "UDP port 53"; "" when it is eligible.
func NotOverlapEligible(s *ServiceSpec) string {
	switch {
	case len(s.Volumes) > 0:
		return "single-writer: volume " + s.Volumes[0].Name
	case len(s.Binds) > 0:
		return "single-writer: bind " + s.Binds[0].Name
	case len(s.Devices) > 0:
		return "exclusive device " + s.Devices[0]
	case len(s.UDP) > 0:
		return "UDP port " + strconv.Itoa(s.UDP[0].Port)
	}
	return ""
}

// BackendPorts lists the container ports the runtime must publish on
// loopback: every public HTTP port, every TCP port (as "tcp") and every UDP
// port (as "udp"), deduplicated, in declaration order. Internal HTTP ports
// and a tcp readiness port no interface declares are never published: R30's
// helper probes them from the app network.
func (s *ServiceSpec) BackendPorts() []PortSpec {
	var out []PortSpec
	seen := map[PortSpec]bool{}
	add := func(p PortSpec) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, h := range s.HTTP {
		if h.Public() {
			add(PortSpec{Port: h.Port, Protocol: "tcp"})
		}
	}
	for _, t := range s.TCP {
		add(PortSpec{Port: t.Port, Protocol: "tcp"})
	}
	for _, u := range s.UDP {
		add(PortSpec{Port: u.Port, Protocol: "udp"})
	}
	return out
}

// PortSpec is one container port and its protocol ("tcp" or "udp").
type PortSpec struct {
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
}
