package core

import (
	"context"
	"time"
)

// OpJob is Operation.Kind of one run of a scheduled job. A job op is
// journaled beside the app's mutations but is not one: it is never the
// app's latest op, it takes no app lock while it runs, and it changes no
// record but its own.
const OpJob = "job"

// Job defaults and bounds.
const (
	// DefaultJobTimeout bounds one run when the manifest sets no timeout.
	DefaultJobTimeout = 10 * time.Minute
	// MaxJobTimeout is the longest timeout a job may set.
	MaxJobTimeout = 24 * time.Hour
	// JobOutputMax is how much of a run's output (its last bytes) the
	// journal keeps.
	JobOutputMax = 64 << 10
)

// JobSpec is one [jobs.NAME] of the manifest: a command run on Schedule
// in a new container of Service's serving generation (its image, env,
// secrets, mounts and networks).
type JobSpec struct {
	// Name is the table key, a DNS label.
	Name string `json:"name"`
	// Service is the service whose serving generation the job runs as.
	Service string `json:"service"`
	// Schedule is "@every DURATION", a descriptor (@hourly, @daily, …) or
	// five cron fields read in UTC (package core/schedule).
	Schedule string `json:"schedule"`
	// Command is argv (no shell); it replaces the image's CMD, and the
	// image's ENTRYPOINT still runs unless the service sets entrypoint.
	Command []string `json:"command"`
	// Timeout bounds one run (zero: DefaultJobTimeout); a run still going
	// then is killed and fails.
	Timeout Duration `json:"timeout,omitempty"`
}

// EffectiveTimeout is Timeout, or DefaultJobTimeout when zero.
func (j JobSpec) EffectiveTimeout() time.Duration {
	if j.Timeout <= 0 {
		return DefaultJobTimeout
	}
	return time.Duration(j.Timeout)
}

// Job returns the job named name and true, or false when absent.
func (a *AppSpec) Job(name string) (*JobSpec, bool) {
	for i := range a.Jobs {
		if a.Jobs[i].Name == name {
			return &a.Jobs[i], true
		}
	}
	return nil, false
}

// Job run triggers (JobRun.Trigger).
const (
	JobTriggerSchedule = "schedule"
	JobTriggerManual   = "manual"
)

// JobRun is what a job op records of its run.
type JobRun struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	// Trigger is "schedule" (the reconcile watcher) or "manual" (jobs run).
	Trigger string `json:"trigger"`
	// Container is the run's container once created ("" before).
	Container string `json:"container,omitempty"`
	// ExitCode is the command's exit status once it exited (nil: it did
	// not exit by itself: not started, timed out or interrupted).
	ExitCode *int `json:"exit_code,omitempty"`
	// Output is the last JobOutputMax bytes of stdout and stderr,
	// interleaved as the engine logged them, secret values redacted;
	// Truncated says earlier output was dropped.
	Output    string `json:"output,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// JobLocker is an optional Store extension: TryLockJob takes the lock of
// one run of app's job only if no other run holds it (ok=false, nil
// error: a run is going). The lock dies with its holder's process, so a
// run whose process died no longer holds it. A store without it cannot
// run jobs.
type JobLocker interface {
	TryLockJob(ctx context.Context, app, job string, holder LockHolder) (lock AppLock, ok bool, err error)
}
