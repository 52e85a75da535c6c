package swarm

import (
	"context"
	"fmt"
	"strings"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// labelControl marks the Docker secrets of the control credentials:
// "edge" (the edges' secret, Control.SecretData) or "record" (the
// manager's whole record, for an adopting manager).
const labelControl = "dev.gordon.control"

// EnsureControlSecret returns the ID of the edges' Docker secret
// (c.SecretName), creating it when missing. When c's current
// credentials differ from the baked ones (after a rotate-token) they are
// baked first: a new secret, so the edge service's tasks are replaced
// once. c is saved when it changed; baked reports whether it did.
func EnsureControlSecret(ctx context.Context, api client.APIClient, stateDir string, c *Control) (id string, baked bool, err error) {
	if c.Baked.Generation != c.Generation {
		c.Baked = BakedTokens{Generation: c.Generation, Push: c.Push, Edge: c.Edge}
		c.SecretName, baked = "", true
	}
	if c.SecretName != "" {
		if res, err := api.SecretInspect(ctx, c.SecretName, client.SecretInspectOptions{}); err == nil && res.Secret.Spec.Name == c.SecretName {
			return res.Secret.ID, baked, nil
		}
	}
	data, err := c.SecretData()
	if err != nil {
		return "", baked, err
	}
	name := "gordon-edge-control-" + randomToken()[:12]
	res, err := api.SecretCreate(ctx, client.SecretCreateOptions{Spec: swarm.SecretSpec{
		Annotations: swarm.Annotations{Name: name, Labels: map[string]string{labelManaged: "true", labelRole: roleSystem, labelControl: "edge"}},
		Data:        data,
	}})
	if err != nil {
		return "", baked, fmt.Errorf("create the edges' control secret: %w", dockererr.Classify(err))
	}
	c.SecretName = name
	if err := SaveControl(stateDir, *c); err != nil {
		return "", baked, fmt.Errorf("control credentials: %w", err)
	}
	return res.ID, baked, nil
}

// DropControlSecrets removes the edges' control secrets other than keep
// that no service uses any more (one Swarm still finds in use is left
// for the next system start).
func DropControlSecrets(ctx context.Context, api client.APIClient, keep string) {
	res, err := api.SecretList(ctx, client.SecretListOptions{Filters: make(client.Filters).Add("label", labelControl+"=edge")})
	if err != nil {
		return
	}
	for _, s := range res.Items {
		if s.Spec.Name != keep && strings.HasPrefix(s.Spec.Name, "gordon-edge-control-") {
			_, _ = api.SecretRemove(ctx, s.ID, client.SecretRemoveOptions{})
		}
	}
}
