package swarm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/api/types/swarm"
	"github.com/moby/moby/client"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/internal/dockererr"
)

// LabelStateSystem marks the state config holding swarm.json (the edge's
// settings) instead of an app's records (SPEC R80).
const LabelStateSystem = "dev.gordon.state-system"

// syncSystem keeps one config holding swarm.json (the edge's ports, ACME
// settings, registry, drain), so an adopting manager starts the edge as
// it runs: the same spec, no task replaced.
func (m *Mirror) syncSystem(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(m.StateDir, ConfigFile))
	if err != nil {
		return nil // not a swarm's state directory (yet)
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])[:16]
	if m.system == hash {
		return nil
	}
	res, err := m.API.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("label", LabelStateSystem)})
	if err != nil {
		return fmt.Errorf("list the swarm state configs: %w", dockererr.Classify(err))
	}
	keep := ""
	for _, c := range res.Items {
		if c.Spec.Labels[LabelStateHash] == hash && c.Spec.Labels[LabelStateOwner] == m.Owner {
			keep = c.ID
		}
	}
	if keep == "" {
		now := time.Now
		if m.Now != nil {
			now = m.Now
		}
		labels := map[string]string{labelManaged: "true", LabelStateSystem: "swarm", LabelStateHash: hash,
			LabelStateNode: m.Node, LabelStateOwner: m.Owner, LabelStateAt: now().UTC().Format(time.RFC3339Nano)}
		cr, err := m.API.ConfigCreate(ctx, client.ConfigCreateOptions{Spec: swarm.ConfigSpec{
			Annotations: swarm.Annotations{Name: configName("swarm", hash, m.Owner), Labels: labels}, Data: data}})
		if err != nil {
			return fmt.Errorf("write the swarm state config: %w", dockererr.Classify(err))
		}
		keep = cr.ID
	}
	var errs []error
	for _, c := range res.Items {
		if c.ID == keep {
			continue
		}
		if _, err := m.API.ConfigRemove(ctx, c.ID, client.ConfigRemoveOptions{}); err != nil && !errors.Is(dockererr.Classify(err), core.ErrNotFound) {
			errs = append(errs, fmt.Errorf("remove the old swarm state config %s: %w", c.Spec.Name, dockererr.Classify(err)))
		}
	}
	if len(errs) == 0 {
		m.system = hash
	}
	return errors.Join(errs...)
}

// AdoptableConfig returns the swarm.json the newest swarm state config
// holds (found false when there is none): the edge's settings as the
// state directory that drives it recorded them. A config that does not
// parse is core.ErrInvalid.
func AdoptableConfig(ctx context.Context, api client.APIClient) (c Config, found bool, err error) {
	res, err := api.ConfigList(ctx, client.ConfigListOptions{Filters: make(client.Filters).Add("label", LabelStateSystem)})
	if err != nil {
		return Config{}, false, fmt.Errorf("list the swarm state configs: %w", dockererr.Classify(err))
	}
	newest, at := "", time.Time{}
	for _, it := range res.Items {
		t, _ := time.Parse(time.RFC3339Nano, it.Spec.Labels[LabelStateAt])
		if newest == "" || t.After(at) {
			newest, at = it.ID, t
		}
	}
	if newest == "" {
		return Config{}, false, nil
	}
	ins, err := api.ConfigInspect(ctx, newest, client.ConfigInspectOptions{})
	if err != nil {
		return Config{}, false, fmt.Errorf("read the swarm state config: %w", dockererr.Classify(err))
	}
	if err := json.Unmarshal(ins.Config.Spec.Data, &c); err != nil {
		return Config{}, false, fmt.Errorf("the swarm state config %s: %w: %w", ins.Config.Spec.Name, core.ErrInvalid, err)
	}
	c.defaults()
	return c, true, nil
}
