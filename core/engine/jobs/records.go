package jobs

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Kind is core.Operation.Kind of one run of a job. A job op is journaled
// beside the app's mutations but is not one: it is never the app's latest
// op, it takes no app lock while it runs, and it changes no record but
// its own. Its one step, "job.<name>", records the run: Service, After
// (the run's container once created), Image and Digest, Detail (the
// command, how it ended and what triggered it), Result ("exit N" once the
// command exited by itself), Error, and Diagnostics (the output's last
// OutputMax bytes, one line each, secret values redacted).
const Kind = "job"

// Defaults and bounds.
const (
	// DefaultTimeout bounds one run when the manifest sets no timeout.
	DefaultTimeout = 10 * time.Minute
	// OutputMax is how much of a run's output (its last bytes) the
	// journal keeps.
	OutputMax = 64 << 10
)

// Run triggers.
const (
	TriggerSchedule = "schedule"
	TriggerManual   = "manual"
)

// RunLocker is the Store extension a run needs: TryLockJob takes the lock
// of one run of app's job only if no other run holds it (ok=false, nil
// error: a run is going). The lock dies with its holder's process. The
// journal and coretest's MemStore have it.
type RunLocker interface {
	TryLockJob(ctx context.Context, app, job string, holder core.LockHolder) (lock core.AppLock, ok bool, err error)
}

// Timeout is j's timeout, or DefaultTimeout when it sets none.
func Timeout(j core.JobSpec) time.Duration {
	if j.Timeout <= 0 {
		return DefaultTimeout
	}
	return time.Duration(j.Timeout)
}

// find returns spec's job named name.
func find(spec core.AppSpec, name string) (core.JobSpec, bool) {
	for _, j := range spec.Jobs {
		if j.Name == name {
			return j, true
		}
	}
	return core.JobSpec{}, false
}

// stepID is the journal step of a run of job.
func stepID(job string) string { return "job." + job }

// NameOf is the job an op ran ("" when op is not a job's run).
func NameOf(op core.Operation) string {
	if op.Kind != Kind || len(op.Steps) == 0 {
		return ""
	}
	name, _ := strings.CutPrefix(op.Steps[0].ID, "job.")
	return name
}

// ExitCode is the exit status a job op recorded; ok is false when the
// command did not exit by itself (not started, timed out, interrupted, or
// still running).
func ExitCode(op core.Operation) (code int, ok bool) {
	if NameOf(op) == "" {
		return 0, false
	}
	s, found := strings.CutPrefix(op.Steps[0].Result, "exit ")
	if !found {
		return 0, false
	}
	code, err := strconv.Atoi(s)
	return code, err == nil
}

// Output is the output a job op kept, one line each.
func Output(op core.Operation) []string {
	if NameOf(op) == "" {
		return nil
	}
	return op.Steps[0].Diagnostics
}

// Container is the container of a job op's run ("" before it existed).
func Container(op core.Operation) string {
	if NameOf(op) == "" {
		return ""
	}
	return op.Steps[0].After
}
