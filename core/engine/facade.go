package engine

import (
	"net/http"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/jobs"
	"github.com/gordon-deploy/docker-gordon/core/engine/lifecycle"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/reconcile"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
	"github.com/hashicorp/go-hclog"
)

// Engine is the deploy/lifecycle use-case layer (SPEC "Engine"). It drives
// the backends only through the core interfaces and holds no state of its
// own between calls: everything durable is in Store (decision 3).
//
// Engine is the facade of the engine's packages: each exported method
// delegates to the flow that owns it (deploy, lifecycle, reconcile), built
// over the shared steps (package steps) with this Engine's configuration
// and its one in-process State.
type Engine struct {
	Store   core.Store
	Runtime core.Runtime
	Traffic core.Traffic
	// Readiness runs deploy-time and declared probes (R29–R35).
	Readiness *ReadinessWaiter
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
	// Snapshots is the volume snapshot store (docs/data.md): replacements
	// snapshot volumes into it, rollbacks with their data restore from it;
	// nil takes and restores none.
	Snapshots *snapshot.Store

	stateOnce sync.Once
	state     *steps.State
	schedOnce sync.Once
	sched     *jobs.Scheduler
}

// flows is the stack of the engine's layers over a copy of e's
// configuration and e's State: reconcile ⊃ lifecycle ⊃ deploy ⊃ oprun ⊃
// steps. A copy per call, so a caller may set e's fields between calls.
func (e *Engine) flows() *reconcile.Engine {
	e.stateOnce.Do(func() { e.state = &steps.State{} })
	s := &steps.Engine{
		Store:                   e.Store,
		Runtime:                 e.Runtime,
		Traffic:                 e.Traffic,
		Readiness:               e.Readiness,
		Clock:                   e.Clock,
		Logger:                  e.Logger,
		Progress:                e.Progress,
		NewOpID:                 e.NewOpID,
		Holder:                  e.Holder,
		LockTimeout:             e.LockTimeout,
		LockWait:                e.LockWait,
		DrainTimeout:            e.DrainTimeout,
		DrainPoll:               e.DrainPoll,
		MonitorTick:             e.MonitorTick,
		HealthPollInterval:      e.HealthPollInterval,
		PortCheck:               e.PortCheck,
		CandidateWatch:          e.CandidateWatch,
		LogTailLines:            e.LogTailLines,
		OnEffect:                e.OnEffect,
		AfterCreate:             e.AfterCreate,
		BindPolicy:              e.BindPolicy,
		PrivilegePolicy:         e.PrivilegePolicy,
		Retention:               e.Retention,
		RegistryAuth:            e.RegistryAuth,
		TrafficHint:             e.TrafficHint,
		EdgeNetwork:             e.EdgeNetwork,
		CreateWithRestartPolicy: e.CreateWithRestartPolicy,
		RegistryOnly:            e.RegistryOnly,
		NotifyClient:            e.NotifyClient,
		NotifyFailed:            e.NotifyFailed,
		Snapshots:               e.Snapshots,
		State:                   e.state,
	}
	return &reconcile.Engine{Engine: &lifecycle.Engine{Engine: &deploy.Engine{Engine: &oprun.Engine{Engine: s}}}}
}
