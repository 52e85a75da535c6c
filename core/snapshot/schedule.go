package snapshot

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/gordon-deploy/docker-gordon/core"
)

// DefaultBackupKeep is how many scheduled backups of a service are kept
// when [services.X.backup] sets no keep.
const DefaultBackupKeep = 7

// ParseSchedule parses a backup schedule: five cron fields ("0 3 * * *",
// the machine's local time) or a descriptor ("@daily", "@every 6h").
func ParseSchedule(s string) (cron.Schedule, error) {
	sch, err := cron.ParseStandard(s)
	if err != nil {
		return nil, fmt.Errorf("%q is no schedule: want five cron fields such as \"0 3 * * *\" (minute hour day month weekday) or \"@daily\": %v", s, err)
	}
	return sch, nil
}

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
// every, or the schedule's first time after since. A time in the past is
// due now, once, however many were missed (the machine was down). Zero
// when the service has no schedule (or an invalid one).
func NextBackup(s *core.ServiceSpec, since time.Time) time.Time {
	if s.BackupEvery > 0 {
		return since.Add(s.BackupEvery.D())
	}
	if s.BackupSchedule == "" {
		return time.Time{}
	}
	sch, err := ParseSchedule(s.BackupSchedule)
	if err != nil {
		return time.Time{}
	}
	return sch.Next(since)
}
