package deploy

import (
	"context"
	"fmt"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// GenerationContainer is the spec of a new container of the generation
// ACTIVE records for service (as, at revision rev): the recorded image,
// the revision's app env with the service's env and its secrets as of
// now, its volumes, binds, project files and secret files, its container
// keys, on the app network and the shared networks, named cname and
// labelled for opID. It answers to none of the service's names (no
// alias, no port) and has no restart policy: a container beside the
// serving one, such as a job's run. It also returns the secret values
// (to redact output); the caller deletes the per-container secret files
// (Store.DeleteContainerSecrets of cname) once the container is gone.
func (e *Engine) GenerationContainer(ctx context.Context, app string, info core.AppInfo, service string, as *core.ActiveService, rev core.Revision, cname, opID string) (core.ContainerSpec, []string, error) {
	pin, err := e.servingPin(ctx, nil, app, service, as, rev, time.Now())
	if err != nil {
		return core.ContainerSpec{}, nil, fmt.Errorf("app %s service %s: %w", app, service, err)
	}
	d := &deployRun{e: e, app: app, info: info, rev: rev, op: &core.Operation{ID: opID}}
	s := &serviceRun{d: d, ps: PlannedService{Service: service}, pin: pin}
	cs, err := s.candidateSpec(ctx, cname)
	if err != nil {
		return core.ContainerSpec{}, nil, fmt.Errorf("app %s service %s: %w", app, service, err)
	}
	cs.Aliases, cs.Ports, cs.RestartPolicy = nil, nil, ""
	return cs, pin.secrets, nil
}
