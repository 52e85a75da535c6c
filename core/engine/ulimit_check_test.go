package engine_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
)

// R12/R13: ulimits the engine cannot grant refuse a deploy before anything
// is stored: the engine is asked with a short-lived check container (the
// service's image, the declared ulimits, an entrypoint no image has) that
// is removed at once; the refusal names the limit.
func TestR12_UlimitTheEngineCannotGrantRefusesBeforeAnythingIsStored(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := coretest.WebSpec(0)
	spec.Container.Ulimits = []core.Ulimit{{Name: "nofile", Soft: 1024, Hard: 2000000}}
	h.Runtime.NextIDs = []string{"c-check"}
	h.Runtime.Fail(coretest.MStart, "c-check", errors.New("OCI runtime create failed: runc create failed: unable to start container process: error during container init: error setting rlimits for ready process: error setting rlimit type 7: operation not permitted: unknown"), 1)
	_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(spec), "sha", "")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrInvalid)
	assert.Contains(t, err.Error(), "ulimit nofile (soft 1024, hard 2000000)")
	assert.Contains(t, err.Error(), "error setting rlimit type 7: operation not permitted")
	created := h.Runtime.Created()
	require.Len(t, created, 1)
	assert.Equal(t, spec.Container.Ulimits, created[0].Options.Ulimits)
	assert.Equal(t, []string{"/.gordon-ulimit-check"}, created[0].Entrypoint)
	assert.False(t, h.Runtime.Exists("c-check"), "the check container is removed")
	_, derr := h.Store.LoadDesired(h.Ctx(), "blog")
	assert.ErrorIs(t, derr, core.ErrNotFound, "nothing stored")
}

// A check container that starts (or fails for another reason, such as the
// missing entrypoint) accepts the ulimits; a service without ulimits runs
// no check.
func TestR12_UlimitsTheEngineGrantsPass(t *testing.T) {
	h := coretest.NewEngine(t)
	spec := coretest.WebSpec(0)
	spec.Container.Ulimits = []core.Ulimit{{Name: "nofile", Soft: 1024, Hard: 4096}}
	h.Runtime.NextIDs = []string{"c-check"}
	h.Runtime.Fail(coretest.MStart, "c-check", errors.New(`exec: "/.gordon-ulimit-check": stat /.gordon-ulimit-check: no such file or directory`), 1)
	_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(spec), "sha", "")
	require.NoError(t, err)
	assert.False(t, h.Runtime.Exists("c-check"))

	h2 := coretest.NewEngine(t)
	_, err = h2.Engine.SubmitChecked(h2.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", "")
	require.NoError(t, err)
	assert.Empty(t, h2.Runtime.Created(), "no ulimits, no check container")
}
