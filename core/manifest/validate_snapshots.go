package manifest

import (
	"slices"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/schedule"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// maxSnapshotKeep bounds [services.X.snapshots].keep.
const maxSnapshotKeep = 100

// snapshots validates [services.X.snapshots]: before_deploy "auto",
// "always" or "never"; keep from 1 to 100. A service without volumes has
// nothing to snapshot. It sets svc's snapshot fields when valid.
func (v *validator) snapshots(key string, raw *rawSnapshots, svc *core.ServiceSpec) {
	if raw == nil {
		return
	}
	if len(svc.Volumes) == 0 {
		v.add(key, "this service declares no [[volume]], so there is nothing to snapshot; remove [snapshots]")
		return
	}
	if raw.BeforeDeploy != nil {
		switch *raw.BeforeDeploy {
		case snapshot.PolicyAuto, snapshot.PolicyAlways, snapshot.PolicyNever:
			svc.SnapshotsBeforeDeploy = *raw.BeforeDeploy
		default:
			v.addf(key+".before_deploy", `%q: want "auto" (volumes up to 1 GiB, a warning above), "always" or "never"`, *raw.BeforeDeploy)
		}
	}
	if raw.Keep != nil {
		if *raw.Keep < 1 || *raw.Keep > maxSnapshotKeep {
			v.addf(key+".keep", "%d is out of range: want how many snapshots to keep, from 1 to %d", *raw.Keep, maxSnapshotKeep)
			return
		}
		svc.SnapshotsKeep = *raw.Keep
	}
}

// Bounds of [services.X.backup].every.
const (
	minBackupEvery = time.Second
	maxBackupEvery = 365 * 24 * time.Hour
)

// Bounds of [services.X.backup].timeout.
const (
	minBackupTimeout = time.Second
	maxBackupTimeout = 24 * time.Hour
)

// backup validates [services.X.backup] (docs/data.md): exactly one of
// every (a duration) and schedule (cron fields or a descriptor); keep
// from 1 to 100 (default 7); command, an argv whose stdout is the backup
// (an online dump), and its timeout (1s..24h, default 1h). Without a
// command, only a service with volumes has data to back up.
func (v *validator) backup(key string, raw *rawBackup, svc *core.ServiceSpec) {
	if raw == nil {
		return
	}
	switch {
	case raw.Command != nil && (len(*raw.Command) == 0 || (*raw.Command)[0] == ""):
		v.add(key+".command", `want the program and its arguments, whose output is the backup, e.g. ["pg_dumpall", "-U", "postgres"] (no shell; use ["sh", "-c", "…"] for one)`)
		return
	case raw.Command != nil:
		svc.BackupCommand = slices.Clone(*raw.Command)
	case raw.Timeout != nil:
		v.add(key+".timeout", "timeout bounds an online dump: set command too, or remove timeout")
		return
	case len(svc.Volumes) == 0:
		v.add(key, `this service declares no [[volume]], so there is nothing to snapshot; remove [backup], or set command to a program whose output is the backup (e.g. ["pg_dumpall", "-U", "postgres"])`)
		return
	}
	if raw.Timeout != nil {
		svc.BackupTimeout = v.duration(key+".timeout", raw.Timeout, minBackupTimeout, maxBackupTimeout)
	}
	switch {
	case raw.Every != nil && raw.Schedule != nil:
		v.add(key, `set either every (such as "24h") or schedule (such as "0 3 * * *"), not both`)
	case raw.Every != nil:
		svc.BackupEvery = v.duration(key+".every", raw.Every, minBackupEvery, maxBackupEvery)
	case raw.Schedule != nil:
		if _, err := schedule.Parse(*raw.Schedule); err != nil {
			v.add(key+".schedule", err.Error())
		} else {
			svc.BackupSchedule = *raw.Schedule
		}
	default:
		v.add(key, `missing: set every (such as "24h") or schedule (such as "0 3 * * *")`)
	}
	if raw.Keep != nil {
		if *raw.Keep < 1 || *raw.Keep > maxSnapshotKeep {
			v.addf(key+".keep", "%d is out of range: want how many scheduled backups to keep, from 1 to %d", *raw.Keep, maxSnapshotKeep)
			return
		}
		svc.BackupKeep = *raw.Keep
	}
}
