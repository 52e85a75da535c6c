package snapshot

import (
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/schedule"
)

// DefaultBackupKeep is how many scheduled backups of a service are kept
// when [services.X.backup] sets no keep.
const DefaultBackupKeep = 7

// BackupPolicy is the service's scheduled backup: whether it has one, and
// how many of them are kept.
func BackupPolicy(s *core.ServiceSpec) (scheduled bool, keep int) {
	keep = s.BackupKeep
	if keep <= 0 {
		keep = DefaultBackupKeep
	}
	return s.BackupEvery > 0 || s.BackupSchedule != "", keep
}

// NextBackup is when the service's next scheduled backup is due, counted
// from since (its last backup, else when its generation started): since +
// every, or the schedule's first time after since (core/schedule, as a
// job's: cron fields in UTC). A time in the past is due now, once, however
// many were missed (the machine was down). Zero when the service has no
// schedule (or an invalid one).
func NextBackup(s *core.ServiceSpec, since time.Time) time.Time {
	if s.BackupEvery > 0 {
		return since.Add(s.BackupEvery.D())
	}
	if s.BackupSchedule == "" {
		return time.Time{}
	}
	sch, err := schedule.Parse(s.BackupSchedule)
	if err != nil {
		return time.Time{}
	}
	return sch.Next(since)
}
