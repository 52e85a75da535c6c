package swarm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// The manager's whole control record (tokens, CA key) is also kept as a
// Docker secret that no long-running service references, so Swarm never
// sends it to a worker: a manager adopting the swarm (R80) recovers it
// with a one-shot task on its own node (RecoverControl) and goes on
// pushing to the running edges without replacing them.

// Labels of the record secret.
const (
	labelControlGeneration = "dev.gordon.control-generation"
	labelControlEdge       = "dev.gordon.control-edge"
)

// EnsureRecordSecret keeps one record secret of c (owner: this state
// directory's StateID): a new one when c's generation or edge secret
// changed, older ones removed.
func EnsureRecordSecret(ctx context.Context, api client.APIClient, c Control, owner string) error {
	res, err := api.SecretList(ctx, client.SecretListOptions{Filters: make(client.Filters).Add("label", labelControl+"=record")})
	if err != nil {
		return fmt.Errorf("list the control record secrets: %w", dockererr.Classify(err))
	}
	gen := strconv.FormatUint(c.Generation, 10)
	keep := ""
	for _, s := range res.Items {
		l := s.Spec.Labels
		if l[labelControlGeneration] == gen && l[labelControlEdge] == c.SecretName && l[LabelStateOwner] == owner {
			keep = s.ID
		}
	}
	if keep == "" {
		data, err := json.Marshal(c)
		if err != nil {
			return err
		}
		cr, err := api.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
			Annotations: swarm.Annotations{Name: "gordon-control-record-" + randomToken()[:12], Labels: map[string]string{
				labelManaged: "true", labelRole: roleSystem, labelControl: "record",
				labelControlGeneration: gen, labelControlEdge: c.SecretName, LabelStateOwner: owner}},
			Data: data,
		}})
		if err != nil {
			return fmt.Errorf("create the control record secret: %w", dockererr.Classify(err))
		}
		keep = cr.ID
	}
	for _, s := range res.Items {
		if s.ID != keep {
			_, _ = api.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{})
		}
	}
	return nil
}

// RecoverControl reads the newest control record secret with a one-shot
// task of image (the edge image: `gordon-edge copy-secret`) pinned to
// node (this manager), which copies it into a private directory (0700)
// under stateDir, bind-mounted; the directory is removed once read, and
// nothing is saved (the caller does, once system start goes ahead). auth
// pulls the image. found is false when the swarm has no record secret (an
// edge from before split credentials: system start makes new ones).
func RecoverControl(ctx context.Context, api client.APIClient, stateDir, node, image, auth string) (c Control, found bool, err error) {
	res, err := api.SecretList(ctx, client.SecretListOptions{Filters: make(client.Filters).Add("label", labelControl+"=record")})
	if err != nil {
		return Control{}, false, fmt.Errorf("list the control record secrets: %w", dockererr.Classify(err))
	}
	if len(res.Items) == 0 {
		return Control{}, false, nil
	}
	sort.Slice(res.Items, func(i, j int) bool { return res.Items[i].CreatedAt.After(res.Items[j].CreatedAt) })
	sec := res.Items[0]
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return Control{}, true, err
	}
	dir, err := os.MkdirTemp(stateDir, ".recover-control-")
	if err != nil {
		return Control{}, true, err
	}
	defer os.RemoveAll(dir)
	once := uint64(1)
	spec := swarm.ServiceSpec{
		Annotations: swarm.Annotations{Name: "gordon-control-recover-" + randomToken()[:8], Labels: map[string]string{labelManaged: "true", labelRole: roleSystem}},
		TaskTemplate: swarm.TaskSpec{
			ContainerSpec: &swarm.ContainerSpec{
				Image:   image,
				Command: []string{"/gordon-edge", "copy-secret", "/run/secrets/record", "/out/control.json"},
				Secrets: []*swarm.SecretReference{{SecretID: sec.ID, SecretName: sec.Spec.Name,
					File: &swarm.SecretReferenceFileTarget{Name: "record", UID: "0", GID: "0", Mode: 0o400}}},
				Mounts: []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/out"}},
			},
			RestartPolicy: &swarm.RestartPolicy{Condition: swarm.RestartPolicyConditionNone},
			Placement:     &swarm.Placement{Constraints: []string{"node.id==" + node}},
		},
		Mode: swarm.ServiceMode{Replicated: &swarm.ReplicatedService{Replicas: &once}},
	}
	cr, err := api.ServiceCreate(ctx, client.ServiceCreateOptions{Spec: spec, EncodedRegistryAuth: auth})
	if err != nil {
		return Control{}, true, fmt.Errorf("recover the control credentials: %w", dockererr.Classify(err))
	}
	defer func() { _, _ = api.ServiceRemove(context.WithoutCancel(ctx), cr.ID, client.ServiceRemoveOptions{}) }()
	if err := awaitTaskDone(ctx, api, cr.ID); err != nil {
		return Control{}, true, err
	}
	data, err := os.ReadFile(filepath.Join(dir, "control.json"))
	if err != nil {
		return Control{}, true, fmt.Errorf("recover the control credentials: the one-shot task wrote nothing: %w: %w", core.ErrUnavailable, err)
	}
	if err := json.Unmarshal(data, &c); err != nil || c.Push == "" || c.CA == "" {
		return Control{}, true, fmt.Errorf("recover the control credentials: the record secret %s does not read: %w", sec.Spec.Name, core.ErrInvalid)
	}
	return c, true, nil
}

// awaitTaskDone waits (at most 2 minutes) until the one task of service
// id completed; failed, rejected or not done in time is an error.
func awaitTaskDone(ctx context.Context, api client.APIClient, id string) error {
	deadline := time.Now().Add(2 * time.Minute)
	last := "no task yet"
	for time.Now().Before(deadline) {
		tl, err := api.TaskList(ctx, client.TaskListOptions{Filters: make(client.Filters).Add("service", id)})
		if err != nil {
			return fmt.Errorf("recover the control credentials: %w", dockererr.Classify(err))
		}
		for _, t := range tl.Items {
			switch t.Status.State {
			case swarm.TaskStateComplete:
				return nil
			case swarm.TaskStateFailed, swarm.TaskStateRejected:
				return fmt.Errorf("recover the control credentials: the one-shot task %s: %s %s: %w", t.ID, t.Status.State, t.Status.Err, core.ErrUnavailable)
			}
			last = string(t.Status.State)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("recover the control credentials: the one-shot task is still %s after 2 minutes: %w", last, core.ErrUnavailable)
}
