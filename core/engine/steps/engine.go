package steps

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"

	"github.com/hashicorp/go-hclog"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Engine is the deploy/lifecycle use-case layer (SPEC "Engine"). It drives
// the backends only through the core interfaces and holds no state of its
// own between calls: everything durable is in Store (decision 3).
type Engine struct {
	Store   core.Store
	Runtime core.Runtime
	Traffic core.Traffic
	// Readiness runs deploy-time and declared probes (R29–R35).
	Readiness *readiness.ReadinessWaiter
	// Clock defaults to SystemClock.
	Clock core.Clock
	// Logger defaults to a null logger.
	Logger hclog.Logger
	// Progress, if set, receives live progress events (the CLI renders them).
	Progress func(ProgressEvent)
	// NewOpID, if set, replaces the package's NewOpID as the op id
	// generator (R6); tests inject a deterministic one. nil: NewOpID.
	NewOpID func() string
	// Holder describes this process for lock records (pid, verb).
	Holder core.LockHolder
	// LockTimeout bounds waiting for an app lock (decision 2; default 60 s).
	LockTimeout time.Duration
	// LockWait, if set, receives the one-line notice that a verb waits for
	// an app lock another process holds, naming the holder, before the
	// wait (the CLI prints it on stderr). nil: a PhaseLock progress event.
	LockWait func(msg string)
	// DrainTimeout caps the drain wait before SIGTERM (decision 16; default
	// min(stop grace, 30 s)). Zero means the default.
	DrainTimeout time.Duration
	// DrainPoll is the interval between in-flight checks (default 50 ms).
	DrainPoll time.Duration
	// MonitorTick is how often R76's monitor reads the edge's counts
	// (zero: DefaultMonitorTick, 1 s).
	MonitorTick time.Duration
	// HealthPollInterval is how often docker readiness reads the health
	// status (zero: DefaultHealthPollInterval).
	HealthPollInterval time.Duration
	// PortCheck, if set, re-checks that publish addresses can be bound
	// during preflight (R13 port reservation re-check).
	PortCheck PortChecker
	// CandidateWatch is how often a candidate is inspected while its
	// readiness is awaited, so an exit fails the step at once (default
	// DefaultCandidateWatch).
	CandidateWatch time.Duration
	// LogTailLines is the failure log tail length (default 50, R17.6).
	LogTailLines int
	// Secrets redaction: values to strip from log tails are loaded per deploy.

	// OnEffect, if set, observes engine-internal effects that have no
	// backend call of their own: kind "withdraw" with id "app/service" on
	// every withdrawal attempt (SPEC §3 "Recording traffic"). Tests only.
	OnEffect func(kind, id, detail string)
	// AfterCreate, if set, is called with a candidate's container ID right
	// after the runtime created it and before the ID is journaled (R17.2):
	// the crash tests' kill point between the two. Tests only.
	AfterCreate func(container string)

	// BindPolicy resolves an operator-approved bind name to its host path
	// (R13, <state>/config.toml). nil refuses every bind. Errors should wrap
	// ErrInvalid (name not approved).
	BindPolicy func(name string) (hostPath string, err error)
	// PrivilegePolicy refuses what a service of app asks beyond Docker's
	// defaults (capabilities outside privilege.DefaultCapabilities, host
	// devices) that the operator did not approve ([privileges.<app>] of
	// <state>/config.toml); nil refuses all of it (privilege.Privileges{}).
	// Errors should wrap ErrInvalid and name the line to add.
	PrivilegePolicy func(app string, svc *core.ServiceSpec) error
	// Retention is applied to an app before its lock is released after
	// every operation (Prune); the zero value keeps everything.
	Retention Retention

	// RegistryAuth, if set, returns the X-Registry-Auth value for pulling
	// ref ("" for an anonymous pull); pinImage passes it to
	// Runtime.PullImage through WithRegistryAuth (R13, S26). nil: anonymous.
	RegistryAuth func(ref string) string
	// TrafficHint is what RequireLiveTraffic's refusal says about where
	// the edge runs and how to start it.
	TrafficHint TrafficHint
	// EdgeNetwork is the network the edge reaches every app's instances
	// on besides their app network ("": none). On a swarm it is the
	// shared attachable overlay gordon-edge (on a swarm), and an instance's
	// address there is routed (R18, verifyBinds).
	EdgeNetwork string
	// CreateWithRestartPolicy creates candidates with their final restart
	// policy instead of setting it once they are ready (R59): on a swarm a
	// changed restart policy is a changed task spec, which Swarm answers
	// by replacing the task (a new container at a new address). A
	// candidate that exits while probed is then restarted by the runtime
	// and fails by its readiness budget, not at once.
	CreateWithRestartPolicy bool
	// RegistryOnly says every image comes from a registry (a swarm: each
	// node pulls it), so a failed pull's advice is to push it there.
	RegistryOnly bool
	// NotifyClient, if set, sends [notify] webhooks (tests); nil: an
	// http.Client bounded by NotifyTimeout.
	NotifyClient *http.Client
	// NotifyFailed, if set, receives a one-line notice when a webhook was
	// not delivered (the CLI prints it on stderr as a warning).
	NotifyFailed func(msg string)
	// Snapshots is the volume snapshot store (docs/data.md); nil takes
	// and restores no snapshots.
	Snapshots *snapshot.Store
	// State is what the engine remembers between calls in this process;
	// the facade (package engine) keeps one per Engine.
	*State
}

// State is the engine's memory within one process: image pins, the
// checks of each held app lock, ulimit results, unreadable apps, live ops
// and notified recovery failures. Its zero value is ready to use.
type State struct {
	// pins: image resolutions CheckDeployable made for this command's
	// deploy (pull policy + ref → image), used once by its preflight.
	PinMu sync.Mutex
	Pins  map[string]core.ImageRef
	// ulimitChecks remembers checkUlimits results by image and limits.
	ulimitChecks map[string]error

	// unreadable: apps whose ACTIVE a rebuild could not read (app → error).
	unreadMu   sync.Mutex
	unreadable map[string]string

	// liveOps marks claims live in this process (R12, R45): app → op id.
	liveMu  sync.Mutex
	liveOps map[string]string

	notifyState
	notifyQueue notifyQueue
}

// Phase is the step of long work a ProgressEvent reports (stderr
// progress); it prints as its string.
type Phase string

// Progress phases.
const (
	PhaseLock      Phase = "lock"
	PhaseResolve   Phase = "resolve"
	PhasePull      Phase = "pull"
	PhaseCreate    Phase = "create"
	PhaseStart     Phase = "start"
	PhaseRun       Phase = "run"
	PhaseProbe     Phase = "probe"
	PhaseSwitch    Phase = "switch"
	PhaseDrain     Phase = "drain"
	PhaseRetire    Phase = "retire"
	PhaseWithdraw  Phase = "withdraw"
	PhaseStop      Phase = "stop"
	PhaseRestart   Phase = "restart"
	PhaseRemove    Phase = "remove"
	PhaseDone      Phase = "done"
	PhaseFailed    Phase = "failed"
	PhaseUnchanged Phase = "unchanged"
	PhaseSnapshot  Phase = "snapshot"
	PhaseRestore   Phase = "restore"
)

// ProgressEvent is one line of live progress: a phase of one service (or
// of the app, Service "") with elapsed time.
type ProgressEvent struct {
	App     string
	Service string
	// Phase is one of the Phase constants.
	Phase   Phase
	Detail  string
	Attempt int
	Elapsed time.Duration
	Done    bool
}

func (e *Engine) Now() time.Time {
	if e.Clock == nil {
		return core.SystemClock{}.Now()
	}
	return e.Clock.Now()
}

func (e *Engine) Log() hclog.Logger {
	if e.Logger == nil {
		return hclog.NewNullLogger()
	}
	return e.Logger
}

func (e *Engine) Emit(ev ProgressEvent) {
	if e.Progress != nil {
		e.Progress(ev)
	}
}

// lock takes the app lock bounded by LockTimeout (decision 2). When the
// lock is busy it says so at once, before waiting: through LockWait when
// set, else as a PhaseLock progress event, naming the holder from the lock
// record (pid, verb, op, since, host) and how long it waits.
func (e *Engine) Lock(ctx context.Context, app, verb, op string) (*Hold, error) {
	t := e.LockTimeout
	if t <= 0 {
		t = 60 * time.Second
	}
	lctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	h := e.Holder
	h.Verb, h.Op, h.StartedAt = verb, op, e.Now()
	if lk, ok, err := e.Store.TryLock(lctx, app, h); err == nil && ok {
		return hold(e, app, lk), nil
	}
	holder, herr := e.Store.LockHolder(ctx, app)
	msg := LockWaitText(app, verb, holder, herr, t)
	if e.LockWait != nil {
		e.LockWait(msg)
	} else {
		e.Emit(ProgressEvent{App: app, Phase: PhaseLock, Detail: msg})
	}
	lk, err := e.Store.Lock(lctx, app, h)
	if err != nil {
		return nil, err
	}
	return hold(e, app, lk), nil
}

// LockWaitText is the lock-wait notice: "app blog: deploy waits for the
// app lock, held by pid 4242 (deploy, op op-…, since …, host h); waiting
// up to 1m0s (--lock-timeout)". A holder on another host name (a
// container such as gordon-reconcile, or a remote runner) is named by
// that host, since its pid means nothing here; a holder whose record
// cannot be read is said to be another process.
func LockWaitText(app, verb string, h core.LockHolder, herr error, timeout time.Duration) string {
	who := "another process (its lock record names no process running here)"
	if local, _ := os.Hostname(); herr == nil && h.Host != "" && h.Host != local {
		who = fmt.Sprintf("a %s running in container or host %s (%s)", orUnknown(h.Verb), h.Host, h.Describe())
	} else if herr == nil {
		who = fmt.Sprintf("pid %d (%s)", h.PID, h.Describe())
	}
	return fmt.Sprintf("app %s: %s waits for the app lock, held by %s; waiting up to %s (--lock-timeout)", app, verb, who, timeout)
}

// notifyState is the Engine's memory of notified recovery failures.
type notifyState struct {
	NotifyMu sync.Mutex
	Notified map[string]string
}

func orUnknown(verb string) string {
	if verb == "" {
		return "process"
	}
	return verb
}
