package core

import (
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"net"
	"strconv"
	"time"
)

// The durable records of SPEC 1.2. The journal package stores each one
// atomically (decision 1); core never knows where.

// AppInfo is an app's identity (apps/<app>/app.json).
type AppInfo struct {
	Name string `json:"name"`
	// Incarnation is a UUID that changes when the app is removed and the name
	// reused (SPEC 1.1).
	Incarnation string    `json:"incarnation"`
	CreatedAt   time.Time `json:"created_at"`
}

// Revision is an immutable snapshot of an applied manifest.
type Revision struct {
	// ID is "rev-<n>" with n increasing per app, or any unique id.
	ID   string  `json:"revision"`
	App  string  `json:"app"`
	Spec AppSpec `json:"spec"`
	// SourceSHA256 is the hex sha256 of the manifest file the revision came from.
	SourceSHA256 string    `json:"source_sha256,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
}

// Active is ACTIVE(app): the published effective state (SPEC 1.2).
type Active struct {
	App               string                    `json:"app"`
	Services          map[string]*ActiveService `json:"services"`
	Converged         bool                      `json:"converged"`
	ConvergedRevision string                    `json:"converged_revision,omitempty"`
	Networks          []string                  `json:"networks,omitempty"`
}

// ActiveService is ACTIVE's record of one service's serving generation.
type ActiveService struct {
	EffectiveRevision string    `json:"effective_revision"`
	ActivatedBy       string    `json:"activated_by"`
	ActivatedAt       time.Time `json:"activated_at"`
	// Image is the runtime image reference used to create the container
	// (repo@digest, or the local image ID per decision 15).
	Image string `json:"image"`
	// Digest is the pinned digest or local image ID.
	Digest    string      `json:"digest"`
	Container string      `json:"container"`
	Spec      ServiceSpec `json:"spec"`
	// StopSignal is the generation's effective stop signal (R25), fixed on
	// the container at creation; "" in records older than the field.
	StopSignal string `json:"stop_signal,omitempty"`
	// BackendBinds maps TCP container port → the port the edge dials at
	// IP (the container port itself when IP is set, else a 127.0.0.1 host
	// port).
	BackendBinds map[int]int `json:"backend_binds,omitempty"`
	// UDPBackendBinds maps UDP container port → the port dialled at IP.
	UDPBackendBinds map[int]int `json:"udp_backend_binds,omitempty"`
	// IP is Container's address on Network, read from the live container
	// (SPEC R18); "" means 127.0.0.1 (the loopback fallback, and records
	// written before addresses existed).
	IP      string `json:"ip,omitempty"`
	Network string `json:"network,omitempty"`
	// HoldUntil is set while a single-writer service is between
	// generations (SPEC R58: from its withdrawal in the sequential flow to
	// the publication of its successor): the edge holds requests for its
	// hosts and connections to its published TCP ports until then. A
	// record with binds is routed normally whatever HoldUntil says.
	HoldUntil   *time.Time `json:"hold_until,omitempty"`
	AsleepSince *time.Time `json:"asleep_since,omitempty"` // SPEC R81: instances stopped, not removed; routes wake it
	// Replicas are the generation's other instances when the spec asks for
	// more than one (ServiceSpec.Replicas): the primary instance is
	// Container with BackendBinds and UDPBackendBinds above, every replica
	// is an Instance of the same revision, digest and spec. A record
	// written before replicas existed has none and reads as one instance.
	Replicas []Instance `json:"replicas,omitempty"`
}

// Instance is one running container of a generation and the endpoints
// the edge reaches it at (empty while it is withdrawn): IP:port for each
// bind, 127.0.0.1:port when IP is "" (SPEC R18).
type Instance struct {
	Container string `json:"container"`
	// BackendBinds maps TCP container port → the port dialled at IP.
	BackendBinds map[int]int `json:"backend_binds,omitempty"`
	// UDPBackendBinds maps UDP container port → the port dialled at IP.
	UDPBackendBinds map[int]int `json:"udp_backend_binds,omitempty"`
	// IP is the container's address on Network ("" = 127.0.0.1).
	IP      string `json:"ip,omitempty"`
	Network string `json:"network,omitempty"`
}

// Addr returns the address the edge dials for a bind port:
// "<IP>:<port>", or "127.0.0.1:<port>" when IP is "" (IPv6 in brackets).
func (in Instance) Addr(port int) string {
	ip := in.IP
	if ip == "" {
		ip = "127.0.0.1"
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}

// Instances returns every instance of the generation, the primary
// (Container) first, then the replicas in their recorded order; none when
// the record names no container.
func (a *ActiveService) Instances() []Instance {
	if a == nil || a.Container == "" {
		return nil
	}
	out := make([]Instance, 0, 1+len(a.Replicas))
	out = append(out, Instance{Container: a.Container, BackendBinds: a.BackendBinds, UDPBackendBinds: a.UDPBackendBinds, IP: a.IP, Network: a.Network})
	return append(out, a.Replicas...)
}

// Names reports whether id is one of the generation's instances.
func (a *ActiveService) Names(id string) bool {
	for _, in := range a.Instances() {
		if id != "" && in.Container == id {
			return true
		}
	}
	return false
}

// ReplicaIDs lists the containers of the replicas (not the primary).
func (a *ActiveService) ReplicaIDs() []string {
	var out []string
	if a != nil {
		for _, r := range a.Replicas {
			out = append(out, r.Container)
		}
	}
	return out
}

// Intent is the durable stopped flag (SPEC 1.1).
type Intent struct {
	Stopped     bool                    `json:"stopped"`
	Maintenance *routetable.Maintenance `json:"maintenance,omitempty"` // SPEC R75; nil: off
	UpdatedBy   string                  `json:"updated_by,omitempty"`
	UpdatedAt   time.Time               `json:"updated_at"`
}

// Operation kinds.
const (
	OpDeploy  = "deploy"
	OpStop    = "stop"
	OpStart   = "start"
	OpRestart = "restart"
	OpRemove  = "remove"
	// VerbRollback is Operation.Verb of a deploy a rollback started.
	VerbRollback = "rollback"
	// VerbScale is Operation.Verb of a deploy `scale` started (its
	// revision differs from the serving one in replica counts only).
	VerbScale = "scale"
)

// Outcome is how an operation ended (R9); it marshals as its string.
type Outcome string

// Outcomes (R9); empty while the op is not terminal.
const (
	OutcomeSuccess Outcome = "success"
	OutcomeFailed  Outcome = "failed"
	OutcomePartial Outcome = "partial"
)

// StepState is the state of one journal step; it marshals as its string.
type StepState string

// Step states.
const (
	StepPending   StepState = "pending"
	StepSucceeded StepState = "succeeded"
	StepFailed    StepState = "failed"
)

// Operation is the journal of one mutation (SPEC 1.1, 1.2).
type Operation struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Verb is the verb that started the op when it is not Kind itself:
	// "rollback" for a deploy a rollback started (Kind stays "deploy", so
	// every deploy rule applies). "" means Kind.
	Verb string `json:"verb,omitempty"`
	// RollbackTo is, for a rollback, the revision rolled back to; Revision
	// is the new revision that copies it with pinned images.
	RollbackTo string `json:"rollback_to,omitempty"`
	App        string `json:"app"`
	// Key is the caller's idempotency key (--op-key); empty when generated.
	Key string `json:"key,omitempty"`
	// Fingerprint identifies the request (R6): same key + different
	// fingerprint is a conflict.
	Fingerprint string    `json:"fingerprint,omitempty"`
	Revision    string    `json:"revision,omitempty"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at,omitempty"`
	Steps       []Step    `json:"steps"`
	// Outcome is success, failed or partial once terminal; "" before.
	Outcome  Outcome   `json:"outcome,omitempty"`
	Warnings []Warning `json:"warnings,omitempty"`
}

// VerbOrKind is Verb when set, else Kind: what the user asked for.
func (o Operation) VerbOrKind() string {
	if o.Verb != "" {
		return o.Verb
	}
	return o.Kind
}

// Terminal reports whether the outcome is set (SPEC 1.1).
func (o Operation) Terminal() bool { return o.Outcome != "" }

// Step returns a pointer to the step with id, or nil.
func (o *Operation) Step(id string) *Step {
	for i := range o.Steps {
		if o.Steps[i].ID == id {
			return &o.Steps[i]
		}
	}
	return nil
}

// Step is one journaled step of an operation.
type Step struct {
	ID          string    `json:"id"`
	State       StepState `json:"state"`
	Service     string    `json:"service,omitempty"`
	Before      string    `json:"before,omitempty"`
	After       string    `json:"after,omitempty"`
	Error       string    `json:"error,omitempty"`
	Detail      string    `json:"detail,omitempty"`
	Diagnostics []string  `json:"diagnostics,omitempty"`
	Digest      string    `json:"digest,omitempty"`
	Image       string    `json:"image,omitempty"`
	// Replicas are the containers a deploy step created beside After, each
	// persisted before it starts (R5.3) and converged as After is.
	Replicas []string `json:"replicas,omitempty"`
	// Result is the result a succeeded deploy step reached ("deployed",
	// "unchanged", "removed"), read by a replay (R8); a job's step has its
	// exit status ("exit 3"). Empty elsewhere and in older journals.
	Result    string    `json:"result,omitempty"`
	StartedAt time.Time `json:"started_at,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitempty"`
	// Phases records elapsed time per phase (create, start, probe, switch,
	// drain, retire) for progress reports and benchmarks.
	Phases map[string]Duration `json:"phases,omitempty"`
	// Rollback is set on a monitor step (service.X.monitor) whose window
	// ended in an automatic rollback (R76).
	Rollback *AutoRollback `json:"rollback,omitempty"`
}

// AutoRollback is what R76's automatic rollback of one service measured
// and did. Requests and Errors count the new generation's requests since
// the switch; ErrorRate is Errors/Requests (0 when no request was seen).
// Reason is "error_rate" or "after_switch". Replaced is the new
// generation's primary container, Restored the previous one's and
// RestoredRevision its revision; Restored is only serving when Succeeded.
type AutoRollback struct {
	Reason           string    `json:"reason"`
	Flow             string    `json:"flow"`
	SingleWriter     bool      `json:"single_writer,omitempty"`
	Requests         int64     `json:"requests"`
	Errors           int64     `json:"errors"`
	ErrorRate        float64   `json:"error_rate"`
	MaxErrorRate     float64   `json:"max_error_rate"`
	MinRequests      int64     `json:"min_requests"`
	Window           Duration  `json:"window"`
	At               time.Time `json:"at"`
	Replaced         string    `json:"replaced"`
	Restored         string    `json:"restored"`
	RestoredRevision string    `json:"restored_revision,omitempty"`
	Succeeded        bool      `json:"succeeded"`
}

// Warning is a cleanup warning (SPEC 1.1, R10).
type Warning struct {
	Service  string `json:"service,omitempty"`
	Leftover string `json:"leftover,omitempty"`
	Detail   string `json:"detail"`
}

// Marker reasons (SPEC 1.1).
const (
	MarkerReplacementPending = "replacement-pending"
	MarkerRetirementPending  = "retirement-pending"
	MarkerRemoved            = "removed"
)

// Marker is a recovery inhibition marker, keyed by (App, Service, Container)
// (decision 6: one record per key; saving replaces).
type Marker struct {
	App       string    `json:"app"`
	Service   string    `json:"service"`
	Container string    `json:"container"`
	Reason    string    `json:"reason"`
	Operation string    `json:"operation,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// StopGrace is the superseded generation's grace; zero = default (R25).
	StopGrace Duration `json:"stop_grace,omitempty"`
	// StopSignal is the superseded generation's stop signal (R25), for the
	// record (the container was created with it).
	StopSignal string `json:"stop_signal,omitempty"`
}

// Blocking reports R26: every reason except retirement-pending blocks.
func (m Marker) Blocking() bool { return m.Reason != MarkerRetirementPending }

// Claim is a durable reservation of one loopback host port.
type Claim struct {
	Port      int    `json:"port"`
	Protocol  string `json:"protocol"`
	Owner     string `json:"owner"`
	App       string `json:"app"`
	Container string `json:"container"`
}

// ClaimOwnerBackend is the owner of backend-bind claims.
const ClaimOwnerBackend = "backend"

// Ownership is what an incarnation owns (SPEC 1.2 [C]).
type Ownership struct {
	App          string          `json:"app"`
	Incarnation  string          `json:"incarnation"`
	Volumes      []string        `json:"volumes,omitempty"`
	Secrets      []string        `json:"secrets,omitempty"`
	Images       []string        `json:"images,omitempty"`
	Networks     []string        `json:"networks,omitempty"`
	SingleWriter map[string]bool `json:"single_writer,omitempty"`
}

// Recovery holds the durable in-memory state of SPEC decision 3: verified
// executions, pending withdrawals and crash-loop counters of one app.
type Recovery struct {
	// Verified maps service → the verified execution.
	Verified map[string]VerifiedExecution `json:"verified,omitempty"`
	// PendingWithdrawals is the set of services whose withdrawal was not
	// confirmed (publication inhibition).
	PendingWithdrawals map[string]bool `json:"pending_withdrawals,omitempty"`
	// CrashLoop maps service → counter (SPEC §4 crash-loop budget).
	CrashLoop map[string]CrashLoop `json:"crash_loop,omitempty"`
	// Events maps service → the last recovery the periodic pass made of its
	// serving container (why and what it did); status shows it.
	Events map[string]RecoveryEvent `json:"events,omitempty"`
	// Rebuild maps service → the container ACTIVE names that an
	// interrupted replacement removed without publishing a successor
	// (SPEC R47). The periodic pass rebuilds that service from ACTIVE's
	// pinned revision (R41.3) and drops the entry; an entry whose
	// container ACTIVE no longer names is stale and pruned.
	Rebuild map[string]string `json:"rebuild,omitempty"`
}

// RecoveryEvent is one recovery of a serving container by the periodic
// pass (R41): it was withdrawn and started or restarted in place.
type RecoveryEvent struct {
	At        time.Time `json:"at"`
	Container string    `json:"container"`
	// Reason says why: "unhealthy: <last health check output>" or
	// "exited (exit code N)".
	Reason string `json:"reason"`
	// Action says what was done: "withdrawn, restarted" or "withdrawn, started".
	Action string `json:"action"`
}

// VerifiedExecution records that one exact execution was verified and routed.
type VerifiedExecution struct {
	Container string    `json:"container"`
	StartedAt time.Time `json:"started_at"`
}

// CrashLoop counts restarts of one service's container.
type CrashLoop struct {
	Container       string    `json:"container"`
	Attempts        int       `json:"attempts"`
	LastAttempt     time.Time `json:"last_attempt,omitempty"`
	UnhealthyPasses int       `json:"unhealthy_passes,omitempty"`
}

// LockHolder describes who holds an app lock (decision 2).
type LockHolder struct {
	PID       int       `json:"pid"`
	Verb      string    `json:"verb"`
	Op        string    `json:"op,omitempty"`
	StartedAt time.Time `json:"started_at"`
	Host      string    `json:"host,omitempty"`
}

// Describe says what holds the lock, for humans: "deploy, op op-…, since
// 2026-01-02T03:04:05Z, host h" (the parts it knows; "unknown verb" when the
// record names none).
func (h LockHolder) Describe() string {
	d := h.Verb
	if d == "" {
		d = "unknown verb"
	}
	if h.Op != "" {
		d += ", op " + h.Op
	}
	if !h.StartedAt.IsZero() {
		d += ", since " + h.StartedAt.UTC().Format(time.RFC3339)
	}
	if h.Host != "" {
		d += ", host " + h.Host
	}
	return d
}

// Running describes the generation for humans: "<image> (<digest>)". A local
// image (decision 15) is pinned by its ID, so the manifest reference is shown
// in place of the ID-as-reference.
func (a *ActiveService) Running() string {
	img := a.Image
	if (img == "" || img == a.Digest) && a.Spec.Image != "" {
		img = a.Spec.Image
	}
	return img + " (" + a.Digest + ")"
}
