package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// SPEC R13, S26: a pull carries the registry credentials Engine.RegistryAuth
// returns for the image (through the pull's context, to the runtime), and
// the journal holds none of them.
func TestS26_PullCarriesRegistryCredentialsNotJournaled(t *testing.T) {
	h := depSeedWeb(t, coretest.WebSpec(0))
	var mu sync.Mutex
	var got []string
	h.Runtime.Hook = func(ctx context.Context, method, id string) error {
		if method == coretest.MPull {
			mu.Lock()
			got = append(got, id+" "+core.RegistryAuthFrom(ctx))
			mu.Unlock()
		}
		return nil
	}
	const secret = "c2VjcmV0LWNyZWRlbnRpYWxz"
	h.Engine.RegistryAuth = func(ref string) string { return secret + "-" + ref }
	web := depNewWeb(0)
	res, err := depDeploy(t, h, engine.DeployRequest{App: "blog", Pull: engine.PullAlways}, web)
	require.NoError(t, err)
	assert.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, []string{web.Image + " " + secret + "-" + web.Image}, got)

	op, err := h.Store.LoadOp(h.Ctx(), "blog", res.Op.ID)
	require.NoError(t, err)
	data, err := json.Marshal(op)
	require.NoError(t, err)
	assert.NotContains(t, string(data), secret)

	// Without credentials the pull is anonymous.
	h.Engine.RegistryAuth = func(string) string { return "" }
	got = nil
	web.Env = map[string]string{"X": "2"}
	_, err = depDeploy(t, h, engine.DeployRequest{App: "blog", Pull: engine.PullAlways}, web)
	require.NoError(t, err)
	assert.Equal(t, []string{web.Image + " "}, got)
}
