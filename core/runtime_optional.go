package core

import (
	"context"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// VolumeState is what the engine reports about an existing volume.
type VolumeState struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// VolumeInspector is an optional Runtime extension (SPEC R13 volume
// ownership): InspectVolume returns the named volume's labels, or an error
// wrapping ErrNotFound when no such volume exists. A runtime without it
// skips the ownership check.
type VolumeInspector interface {
	InspectVolume(ctx context.Context, name string) (VolumeState, error)
}

// NetworkRemover is an optional Runtime extension (SPEC R55 network
// reclaim): RemoveNetwork removes the named network; an absent network is
// not an error. A runtime without it leaves networks in place.
type NetworkRemover interface {
	RemoveNetwork(ctx context.Context, name string) error
}

// RestartPolicySetter is an optional Runtime extension (SPEC R59): the
// engine creates a workload without a restart policy, so a candidate that
// exits while it is probed stays exited and fails at once, and sets the
// policy with SetRestartPolicy once the candidate is ready, before ACTIVE
// names it. policy is a ContainerSpec.RestartPolicy value; a missing
// container wraps ErrNotFound; a runtime (plugin) without the operation
// returns an error wrapping errors.ErrUnsupported.
type RestartPolicySetter interface {
	SetRestartPolicy(ctx context.Context, id, policy string) error
}

// TrafficRoutes is an optional Traffic extension: Routes returns the graph
// the backend last applied. Rebuild uses it to keep serving the last good
// routes of an app whose ACTIVE record cannot be read. Errors: the backend
// cannot tell (errors.ErrUnsupported when it does not implement it).
type TrafficRoutes interface {
	Routes(ctx context.Context) (routetable.Graph, error)
}

// AppWideSecrets is the service scope of app-wide secrets (`secrets set
// APP NAME`): a secret a service does not have under its own name is looked
// up here, so one value (a database password) serves several services. No
// service can be named so (service names are DNS labels).
const AppWideSecrets = "_app"
