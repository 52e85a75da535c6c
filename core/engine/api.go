package engine

// The names this package has always exported, now declared by the
// sub-packages that own them: aliases for types and constants, thin
// wrappers for functions, and the Engine's methods, each delegating to the
// flow that owns it.

import (
	"context"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine/deploy"
	"github.com/gordon-deploy/docker-gordon/core/engine/lifecycle"
	"github.com/gordon-deploy/docker-gordon/core/engine/oprun"
	"github.com/gordon-deploy/docker-gordon/core/engine/prune"
	"github.com/gordon-deploy/docker-gordon/core/engine/readiness"
	"github.com/gordon-deploy/docker-gordon/core/engine/reconcile"
	"github.com/gordon-deploy/docker-gordon/core/engine/steps"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// The types of the engine's API.
type (
	Action                 = deploy.Action
	AppStatus              = lifecycle.AppStatus
	BootReport             = reconcile.BootReport
	CandidateExitError     = steps.CandidateExitError
	DeployRequest          = deploy.DeployRequest
	DeployResult           = deploy.DeployResult
	Flow                   = steps.Flow
	ImageVolumeError       = steps.ImageVolumeError
	InstanceStatus         = lifecycle.InstanceStatus
	LifecycleRequest       = oprun.LifecycleRequest
	MaintenanceInfo        = lifecycle.MaintenanceInfo
	MaintenanceRequest     = lifecycle.MaintenanceRequest
	Notification           = steps.Notification
	NotifiedRollback       = steps.NotifiedRollback
	NotifiedService        = steps.NotifiedService
	OpResult               = oprun.OpResult
	OpSummary              = lifecycle.OpSummary
	Phase                  = steps.Phase
	Plan                   = deploy.Plan
	PlanInput              = deploy.PlanInput
	PlannedService         = deploy.PlannedService
	PluginReadinessError   = readiness.PluginReadinessError
	PluginReadinessProblem = readiness.PluginReadinessProblem
	PortChecker            = steps.PortChecker
	ProgressEvent          = steps.ProgressEvent
	ReadinessTimeoutError  = readiness.ReadinessTimeoutError
	ReadinessWaiter        = readiness.ReadinessWaiter
	ReconcileReport        = reconcile.ReconcileReport
	Retention              = steps.Retention
	Result                 = steps.Result
	RetireOptions          = steps.RetireOptions
	RetireResult           = steps.RetireResult
	RevisionInfo           = lifecycle.RevisionInfo
	RollbackRequest        = lifecycle.RollbackRequest
	ScaleRequest           = lifecycle.ScaleRequest
	ServiceResult          = steps.ServiceResult
	ServiceStatus          = lifecycle.ServiceStatus
	Submission             = deploy.Submission
	TrafficDownError       = steps.TrafficDownError
	TrafficHint            = steps.TrafficHint
	UnhealthyError         = steps.UnhealthyError
	WaitResult             = readiness.WaitResult
)

// The constants of the engine's API.
const (
	ActionOverlap              = deploy.ActionOverlap
	ActionRemove               = deploy.ActionRemove
	ActionRunOnce              = deploy.ActionRunOnce
	ActionScale                = deploy.ActionScale
	ActionSequential           = deploy.ActionSequential
	ActionUnchanged            = deploy.ActionUnchanged
	AppStateDegraded           = lifecycle.AppStateDegraded
	AppStateNotDeployed        = lifecycle.AppStateNotDeployed
	AppStateRunning            = lifecycle.AppStateRunning
	AppStateAsleep             = lifecycle.AppStateAsleep
	AppStateStopped            = lifecycle.AppStateStopped
	AppStateUnknown            = lifecycle.AppStateUnknown
	AppStateUnreadable         = lifecycle.AppStateUnreadable
	BootReconciled             = reconcile.BootReconciled
	BootSkipped                = reconcile.BootSkipped
	BootStarted                = reconcile.BootStarted
	BootStopped                = reconcile.BootStopped
	CleanupTimeout             = steps.CleanupTimeout
	DefaultCandidateWatch      = steps.DefaultCandidateWatch
	DefaultDrainPoll           = steps.DefaultDrainPoll
	DefaultHTTPProbeInterval   = readiness.DefaultHTTPProbeInterval
	DefaultHealthPollInterval  = steps.DefaultHealthPollInterval
	DefaultLogProbeInterval    = readiness.DefaultLogProbeInterval
	DefaultMonitorTick         = deploy.DefaultMonitorTick
	DefaultPluginProbeInterval = readiness.DefaultPluginProbeInterval
	DefaultReadinessTimeout    = readiness.DefaultReadinessTimeout
	DefaultReconcileInterval   = reconcile.DefaultReconcileInterval
	DefaultStopGrace           = steps.DefaultStopGrace
	DefaultTCPProbeInterval    = readiness.DefaultTCPProbeInterval
	EnvHookApp                 = steps.EnvHookApp
	EnvHookPreviousRevision    = steps.EnvHookPreviousRevision
	EnvHookRevision            = steps.EnvHookRevision
	EnvHookService             = steps.EnvHookService
	EventOutcome               = steps.EventOutcome
	EventRollback              = steps.EventRollback
	FlowOverlap                = steps.FlowOverlap
	FlowRunOnce                = steps.FlowRunOnce
	FlowScale                  = steps.FlowScale
	FlowSequential             = steps.FlowSequential
	FlowUnchanged              = steps.FlowUnchanged
	HTTPAttemptCap             = readiness.HTTPAttemptCap
	MaxDrainTimeout            = steps.MaxDrainTimeout
	MaxHold                    = steps.MaxHold
	MonitorKept                = deploy.MonitorKept
	MonitorRolledBack          = deploy.MonitorRolledBack
	NotifyBackoff              = steps.NotifyBackoff
	NotifyBudget               = steps.NotifyBudget
	NotifyTimeout              = steps.NotifyTimeout
	NotifyTries                = steps.NotifyTries
	NotifyQueue                = steps.NotifyQueue
	OpMaintenance              = lifecycle.OpMaintenance
	OutcomePending             = lifecycle.OutcomePending
	PhaseCreate                = steps.PhaseCreate
	PhaseDone                  = steps.PhaseDone
	PhaseDrain                 = steps.PhaseDrain
	PhaseFailed                = steps.PhaseFailed
	PhaseHook                  = steps.PhaseHook
	PhaseLock                  = steps.PhaseLock
	PhaseMonitor               = deploy.PhaseMonitor
	PhaseProbe                 = steps.PhaseProbe
	PhasePull                  = steps.PhasePull
	PhaseRemove                = steps.PhaseRemove
	PhaseResolve               = steps.PhaseResolve
	PhaseRestart               = steps.PhaseRestart
	PhaseRetire                = steps.PhaseRetire
	PhaseRun                   = steps.PhaseRun
	PhaseStart                 = steps.PhaseStart
	PhaseStop                  = steps.PhaseStop
	PhaseSwitch                = steps.PhaseSwitch
	PhaseUnchanged             = steps.PhaseUnchanged
	PhaseWithdraw              = steps.PhaseWithdraw
	PluginAttemptCap           = readiness.PluginAttemptCap
	ProbeRampStart             = readiness.ProbeRampStart
	PullAlways                 = deploy.PullAlways
	PullMissing                = deploy.PullMissing
	PullNever                  = deploy.PullNever
	RecoveryBound              = reconcile.RecoveryBound
	ResultDeployed             = steps.ResultDeployed
	ResultFailed               = steps.ResultFailed
	ResultRemoved              = steps.ResultRemoved
	ResultUnchanged            = steps.ResultUnchanged
	RunOnceTimeout             = deploy.RunOnceTimeout
	StepError                  = steps.StepError
	StepIntentMaintenance      = lifecycle.StepIntentMaintenance
	StepIntentRunning          = steps.StepIntentRunning
	StepIntentStopped          = steps.StepIntentStopped
	StepPendingRetire          = steps.StepPendingRetire
	StepPreflight              = steps.StepPreflight
	StepTrafficPublish         = steps.StepTrafficPublish
	TrafficStartWait           = steps.TrafficStartWait
	UnsavedRevision            = deploy.UnsavedRevision
	VerbReconcile              = steps.VerbReconcile
	WorkloadRestartPolicy      = steps.WorkloadRestartPolicy
)

// BuildGraph is steps.BuildGraph.
func BuildGraph(actives []core.Active) routetable.Graph {
	return steps.BuildGraph(actives)
}

// BuildPlan is deploy.BuildPlan.
func BuildPlan(rev core.Revision, active core.Active, observed map[string]core.ContainerState, pendingWithdrawals map[string]bool, markers []core.Marker, resolved map[string]core.ImageRef) deploy.Plan {
	return deploy.BuildPlan(rev, active, observed, pendingWithdrawals, markers, resolved)
}

// CheckImageVolumes is steps.CheckImageVolumes.
func CheckImageVolumes(app string, spec *core.ServiceSpec, img core.ImageRef) error {
	return steps.CheckImageVolumes(app, spec, img)
}

// ContainerName is steps.ContainerName.
func ContainerName(app string, service string, opID string) string {
	return steps.ContainerName(app, service, opID)
}

// DeclaredReadiness is readiness.DeclaredReadiness.
func DeclaredReadiness(s *core.ServiceSpec) core.Readiness {
	return readiness.DeclaredReadiness(s)
}

// DeployReadiness is readiness.DeployReadiness.
func DeployReadiness(s *core.ServiceSpec) core.Readiness {
	return readiness.DeployReadiness(s)
}

// DeployReadinessFor is readiness.DeployReadinessFor.
func DeployReadinessFor(s *core.ServiceSpec, imageHealthcheck bool) core.Readiness {
	return readiness.DeployReadinessFor(s, imageHealthcheck)
}

// EffectiveGrace is steps.EffectiveGrace.
func EffectiveGrace(d core.Duration) time.Duration {
	return steps.EffectiveGrace(d)
}

// EffectiveStopSignal is steps.EffectiveStopSignal.
func EffectiveStopSignal(spec *core.ServiceSpec, img core.ImageRef) string {
	return steps.EffectiveStopSignal(spec, img)
}

// Fingerprint is steps.Fingerprint.
func Fingerprint(kind string, parts ...string) string {
	return steps.Fingerprint(kind, parts...)
}

// HasHealthcheck is steps.HasHealthcheck.
func HasHealthcheck(spec *core.ServiceSpec, img core.ImageRef) bool {
	return steps.HasHealthcheck(spec, img)
}

// HookStepID is steps.HookStepID.
func HookStepID(service string, name string) string {
	return steps.HookStepID(service, name)
}

// IsHookStep is steps.IsHookStep.
func IsHookStep(id string) bool {
	return steps.IsHookStep(id)
}

// IsUnhealthy is steps.IsUnhealthy.
func IsUnhealthy(err error) bool {
	return steps.IsUnhealthy(err)
}

// LockWaitText is steps.LockWaitText.
func LockWaitText(app string, verb string, h core.LockHolder, herr error, timeout time.Duration) string {
	return steps.LockWaitText(app, verb, h, herr, timeout)
}

// MonitorStepID is deploy.MonitorStepID.
func MonitorStepID(service string) string {
	return deploy.MonitorStepID(service)
}

// NetworkName is steps.NetworkName.
func NetworkName(app string) string {
	return steps.NetworkName(app)
}

// NewOpID is steps.NewOpID.
func NewOpID() string {
	return steps.NewOpID()
}

// ProbeTargetFor is readiness.ProbeTargetFor.
func ProbeTargetFor(app string, s *core.ServiceSpec, r core.Readiness, containerID string, startedAt time.Time, binds []core.BackendBind) (core.ProbeTarget, error) {
	return readiness.ProbeTargetFor(app, s, r, containerID, startedAt, binds)
}

// ServiceStepID is steps.ServiceStepID.
func ServiceStepID(service string, verb string) string {
	return steps.ServiceStepID(service, verb)
}

// SpecChanges is deploy.SpecChanges.
func SpecChanges(prev *core.ServiceSpec, next *core.ServiceSpec) []string {
	return deploy.SpecChanges(prev, next)
}

// UnmappedImageVolumes is steps.UnmappedImageVolumes.
func UnmappedImageVolumes(spec *core.ServiceSpec, img core.ImageRef) []string {
	return steps.UnmappedImageVolumes(spec, img)
}

// ValidatePluginReadiness is readiness.ValidatePluginReadiness.
func ValidatePluginReadiness(ctx context.Context, probes core.ProbeSet, app string, services []core.ServiceSpec) error {
	return readiness.ValidatePluginReadiness(ctx, probes, app, services)
}

// VolumeName is steps.VolumeName.
func VolumeName(app string, volume string) string {
	return steps.VolumeName(app, volume)
}

// WithMaintenance is steps.WithMaintenance.
func WithMaintenance(g routetable.Graph, maint map[string]*routetable.Maintenance) routetable.Graph {
	return steps.WithMaintenance(g, maint)
}

// WithUnservedRoutes is steps.WithUnservedRoutes.
func WithUnservedRoutes(g routetable.Graph, actives []core.Active, stopped map[string]bool) routetable.Graph {
	return steps.WithUnservedRoutes(g, actives, stopped)
}

// Boot: see reconcile.Engine.Boot.
func (e *Engine) Boot(ctx context.Context) ([]reconcile.BootReport, error) {
	return e.flows().Boot(ctx)
}

// Prune: see steps.Engine.Prune.
func (e *Engine) Prune(ctx context.Context, app string) (ops, revisions []string, err error) {
	return e.flows().Prune(ctx, app)
}

// CheckDeployable: see deploy.Engine.CheckDeployable.
func (e *Engine) CheckDeployable(ctx context.Context, spec core.AppSpec, pull string) error {
	return e.flows().CheckDeployable(ctx, spec, pull)
}

// CheckImages: see steps.Engine.CheckImages.
func (e *Engine) CheckImages(ctx context.Context, spec core.AppSpec) error {
	return e.flows().CheckImages(ctx, spec)
}

// CheckRoutesFree: see steps.Engine.CheckRoutesFree.
func (e *Engine) CheckRoutesFree(ctx context.Context, spec core.AppSpec) error {
	return e.flows().CheckRoutesFree(ctx, spec)
}

// Deploy: see deploy.Engine.Deploy.
func (e *Engine) Deploy(ctx context.Context, req deploy.DeployRequest) (res *deploy.DeployResult, err error) {
	if err := e.wakeFirst(ctx, req.App, "deploy"); err != nil {
		return nil, err
	}
	return e.flows().Deploy(ctx, req)
}

// Logs: see lifecycle.Engine.Logs.
func (e *Engine) Logs(ctx context.Context, app string, service string, opts core.LogOptions, fn func(service string, line core.LogLine) error) error {
	return e.flows().Logs(ctx, app, service, opts, fn)
}

// Maintenance: see lifecycle.Engine.Maintenance.
func (e *Engine) Maintenance(ctx context.Context, req lifecycle.MaintenanceRequest) (*oprun.OpResult, error) {
	return e.flows().Maintenance(ctx, req)
}

// MaintenanceStatus: see lifecycle.Engine.MaintenanceStatus.
func (e *Engine) MaintenanceStatus(ctx context.Context, app string) (lifecycle.MaintenanceInfo, error) {
	return e.flows().MaintenanceStatus(ctx, app)
}

// MissingImages: see steps.Engine.MissingImages.
func (e *Engine) MissingImages(ctx context.Context, spec core.AppSpec) ([]string, error) {
	return e.flows().MissingImages(ctx, spec)
}

// PlanDeploy: see deploy.Engine.PlanDeploy.
func (e *Engine) PlanDeploy(ctx context.Context, req deploy.DeployRequest) (deploy.Plan, error) {
	return e.flows().PlanDeploy(ctx, req)
}

// Reconcile: see reconcile.Engine.Reconcile.
func (e *Engine) Reconcile(ctx context.Context, apps []string) ([]reconcile.ReconcileReport, error) {
	return e.flows().Reconcile(ctx, apps)
}

// Remove: see lifecycle.Engine.Remove.
func (e *Engine) Remove(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	return e.flows().Remove(ctx, req)
}

// RequireLiveTraffic: see steps.Engine.RequireLiveTraffic.
func (e *Engine) RequireLiveTraffic(ctx context.Context, verb string) error {
	return e.flows().RequireLiveTraffic(ctx, verb)
}

// Restart: see lifecycle.Engine.Restart.
func (e *Engine) Restart(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	if err := e.wakeFirst(ctx, req.App, "restart"); err != nil {
		return nil, err
	}
	return e.flows().Restart(ctx, req)
}

// Revisions: see lifecycle.Engine.Revisions.
func (e *Engine) Revisions(ctx context.Context, app string) ([]lifecycle.RevisionInfo, error) {
	return e.flows().Revisions(ctx, app)
}

// Rollback: see lifecycle.Engine.Rollback.
func (e *Engine) Rollback(ctx context.Context, req lifecycle.RollbackRequest) (*deploy.DeployResult, error) {
	return e.flows().Rollback(ctx, req)
}

// SnapshotCreate: see lifecycle.Engine.SnapshotCreate.
func (e *Engine) SnapshotCreate(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, []snapshot.Manifest, error) {
	return e.flows().SnapshotCreate(ctx, req)
}

// SnapshotRestore: see lifecycle.Engine.SnapshotRestore.
func (e *Engine) SnapshotRestore(ctx context.Context, app, id, opKey string) (*oprun.OpResult, error) {
	return e.flows().SnapshotRestore(ctx, app, id, opKey)
}

// DueBackups: see lifecycle.Engine.DueBackups.
func (e *Engine) DueBackups(ctx context.Context, now time.Time) ([]lifecycle.DueBackup, error) {
	return e.flows().DueBackups(ctx, now)
}

// Backup: see lifecycle.Engine.Backup.
func (e *Engine) Backup(ctx context.Context, app, service string) (*oprun.OpResult, error) {
	return e.flows().Backup(ctx, app, service)
}

// Scale: see lifecycle.Engine.Scale.
func (e *Engine) Scale(ctx context.Context, req lifecycle.ScaleRequest) (*deploy.DeployResult, error) {
	if err := e.wakeFirst(ctx, req.App, "scale"); err != nil {
		return nil, err
	}
	return e.flows().Scale(ctx, req)
}

// ServingContainer: see lifecycle.Engine.ServingContainer.
func (e *Engine) ServingContainer(ctx context.Context, app string, service string, instance int) (string, int, error) {
	return e.flows().ServingContainer(ctx, app, service, instance)
}

// Start: see lifecycle.Engine.Start.
func (e *Engine) Start(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	return e.flows().Start(ctx, req)
}

// Status: see lifecycle.Engine.Status.
func (e *Engine) Status(ctx context.Context, app string) (st lifecycle.AppStatus, err error) {
	return e.flows().Status(ctx, app)
}

// Stop: see lifecycle.Engine.Stop.
func (e *Engine) Stop(ctx context.Context, req oprun.LifecycleRequest) (*oprun.OpResult, error) {
	return e.flows().Stop(ctx, req)
}

// SubmitChecked: see deploy.Engine.SubmitChecked.
func (e *Engine) SubmitChecked(ctx context.Context, spec core.AppSpec, sourceSHA256 string, pull string) (core.Revision, error) {
	return e.flows().SubmitChecked(ctx, spec, sourceSHA256, pull)
}

// SubmitRevision: see deploy.Engine.SubmitRevision.
func (e *Engine) SubmitRevision(ctx context.Context, spec core.AppSpec, sourceSHA256 string) (core.Revision, error) {
	return e.flows().SubmitRevision(ctx, spec, sourceSHA256)
}

// WaitNotifications: see steps.Engine.WaitNotifications.
func (e *Engine) WaitNotifications(ctx context.Context) bool {
	return e.flows().WaitNotifications(ctx)
}

// UnreadableApps: see steps.Engine.UnreadableApps.
func (e *Engine) UnreadableApps() map[string]string {
	return e.flows().UnreadableApps()
}

// PruneObjects removes what docker gordon made and no longer needs, or in
// a dry run lists it: see package prune.
func (e *Engine) PruneObjects(ctx context.Context, objs prune.Objects, arch prune.Archive, req prune.Request) (*prune.Report, error) {
	return prune.Run(ctx, e.flows().Engine.Engine.Engine.Engine, objs, arch, req)
}
