package manifest

import (
	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/snapshot"
)

// maxSnapshotKeep bounds [services.X.snapshots].keep.
const maxSnapshotKeep = 100

// snapshots validates [services.X.snapshots]: before_deploy "auto",
// "always" or "never"; keep from 1 to 100. A service without volumes has
// nothing to snapshot. nil when the table is absent or invalid.
func (v *validator) snapshots(key string, raw *rawSnapshots, svc *core.ServiceSpec) *core.Snapshots {
	if raw == nil {
		return nil
	}
	if len(svc.Volumes) == 0 {
		v.add(key, "this service declares no [[volume]], so there is nothing to snapshot; remove [snapshots]")
		return nil
	}
	out := &core.Snapshots{}
	ok := true
	if raw.BeforeDeploy != nil {
		switch *raw.BeforeDeploy {
		case snapshot.PolicyAuto, snapshot.PolicyAlways, snapshot.PolicyNever:
			out.BeforeDeploy = *raw.BeforeDeploy
		default:
			v.addf(key+".before_deploy", `%q: want "auto" (volumes up to 1 GiB, a warning above), "always" or "never"`, *raw.BeforeDeploy)
			ok = false
		}
	}
	if raw.Keep != nil {
		if *raw.Keep < 1 || *raw.Keep > maxSnapshotKeep {
			v.addf(key+".keep", "%d is out of range: want how many snapshots to keep, from 1 to %d", *raw.Keep, maxSnapshotKeep)
			ok = false
		}
		out.Keep = *raw.Keep
	}
	if !ok {
		return nil
	}
	return out
}
