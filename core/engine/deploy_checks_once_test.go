package engine_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// costCounts are the checks a deploy once repeated under its lock.
type costCounts struct {
	status, secretReads, resolves, bindPolicy int
}

// costHarness is blog with web (an env secret; overlap) and a worker with
// a bind (sequential), serving c-old and c-wold; it counts edge status
// calls and bind-policy (config.toml) reads.
func costHarness(t *testing.T) (*coretest.Harness, core.AppSpec, func() costCounts) {
	h := coretest.NewEngine(t)
	web := coretest.WebSpec(0)
	web.Secrets = []core.SecretRef{{Env: "TOKEN", Name: "token"}}
	worker := core.ServiceSpec{Name: "worker", Image: "registry.example/worker:1",
		Binds: []core.BindMount{{Name: "config", Path: "/etc/app", ReadOnly: true}}}
	h.SeedServing("blog", coretest.BlogApp(web, worker), map[string]string{"web": "c-old", "worker": "c-wold"},
		map[string]map[int]int{"web": {8080: 17000}})
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", "web", "token", []byte("hunter2")))
	var status, policy atomic.Int64
	h.Traffic.StatusFn = func(context.Context) (core.TrafficStatus, error) {
		status.Add(1)
		return core.TrafficStatus{}, nil
	}
	h.Engine.BindPolicy = func(name string) (string, error) {
		policy.Add(1)
		return "/srv/approved/" + name, nil
	}
	next := web
	next.Image = "registry.example/blog:1.5"
	nextWorker := worker
	nextWorker.Image = "registry.example/worker:2"
	h.Reset()
	r0 := h.Runtime.Calls(coretest.MResolve)
	return h, coretest.BlogApp(next, nextWorker), func() costCounts {
		return costCounts{status: int(status.Load()), secretReads: h.Store.Calls("GetSecret"),
			resolves: h.Runtime.Calls(coretest.MResolve) - r0, bindPolicy: int(policy.Load())}
	}
}

// TestDeployChecksEachThingOnceUnderOneLock: `deploy -f` as the CLI runs it
// (Deploy with Submit; Prepare runs CheckImages as the CLI does) holds the
// app lock once and under it asks the edge's status once (R68 and the
// preflight's conflict check share it; the drain's one in-flight poll is
// the second call), reads each secret once, resolves each image once and
// reads the bind policy (config.toml) once per bind. Before the memo the
// same command asked the status 5 times, read the secret 4 times, resolved
// each image twice and read the policy 3 times.
func TestDeployChecksEachThingOnceUnderOneLock(t *testing.T) {
	h, spec, counts := costHarness(t)
	ctx := h.Ctx()
	var stored string
	res, err := h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog", Pull: engine.PullMissing, Submit: &engine.Submission{
		Spec: spec, SourceSHA256: "sha-cost",
		Prepare: func(ctx context.Context) error { return h.Engine.CheckImages(ctx, spec) },
		Stored:  func(r core.Revision) { stored = r.ID },
	}})
	require.NoError(t, err)
	require.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, res.Op.Revision, stored, "the deployed revision is the one stored")
	assert.Equal(t, costCounts{status: 2, secretReads: 1, resolves: 2, bindPolicy: 1}, counts())
	assert.Equal(t, 1, h.Store.Calls("TryLock")+h.Store.Calls("Lock"), "one lock hold")
}

// TestDeployChecksAreNotRememberedAcrossLocks: two deploys of the same
// engine (one CLI process) ask everything again: the memo lives only while
// the app lock is held.
func TestDeployChecksAreNotRememberedAcrossLocks(t *testing.T) {
	h, spec, counts := costHarness(t)
	ctx := h.Ctx()
	_, err := h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog", Submit: &engine.Submission{Spec: spec, SourceSHA256: "a"}})
	require.NoError(t, err)
	first := counts()
	spec.Services[0].Image = "registry.example/blog:1.6"
	_, err = h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog", Submit: &engine.Submission{Spec: spec, SourceSHA256: "b"}})
	require.NoError(t, err)
	second := counts()
	assert.Equal(t, 2*first.secretReads, second.secretReads)
	assert.Equal(t, 2*first.bindPolicy, second.bindPolicy)
	assert.Greater(t, second.resolves, first.resolves)
	assert.GreaterOrEqual(t, second.status, 2*1+first.status)
}

// TestDeployReadsASecretChangedBetweenDeploys: a secret set between two
// deploys of one process reaches the second deploy's candidate.
func TestDeployReadsASecretChangedBetweenDeploys(t *testing.T) {
	h, spec, _ := costHarness(t)
	ctx := h.Ctx()
	_, err := h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog", Submit: &engine.Submission{Spec: spec, SourceSHA256: "a"}})
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(ctx, "blog", "web", "token", []byte("changed")))
	spec.Services[0].Image = "registry.example/blog:1.6"
	_, err = h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog", Submit: &engine.Submission{Spec: spec, SourceSHA256: "b"}})
	require.NoError(t, err)
	cs := h.Runtime.Created()
	require.NotEmpty(t, cs)
	last := cs[len(cs)-1]
	for _, c := range cs {
		if c.Labels[core.LabelService] == "web" {
			last = c
		}
	}
	assert.Contains(t, last.Env, "TOKEN=changed")
}

// TestDeploySubmitRefusalStoresNothing: a deploy -f whose checks refuse
// (a secret not set) stores no revision and creates nothing.
func TestDeploySubmitRefusalStoresNothing(t *testing.T) {
	h, spec, _ := costHarness(t)
	ctx := h.Ctx()
	spec.Services[0].Secrets = append(spec.Services[0].Secrets, core.SecretRef{Env: "MISSING", Name: "missing"})
	before, err := h.Store.LoadDesired(ctx, "blog")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(ctx, engine.DeployRequest{App: "blog", Submit: &engine.Submission{Spec: spec, SourceSHA256: "x",
		Stored: func(core.Revision) { t.Error("a refused manifest was stored") }}})
	require.ErrorIs(t, err, core.ErrNotFound)
	after, err := h.Store.LoadDesired(ctx, "blog")
	require.NoError(t, err)
	assert.Equal(t, before, after)
	assert.Equal(t, 0, h.Events.Count("create", ""))
}

// TestDeployRetiresOldInstancesInParallel: the superseded generation's
// instances are stopped together (each with its own grace), not one grace
// after another: every stop is in flight before any returns.
func TestDeployRetiresOldInstancesInParallel(t *testing.T) {
	h := repSeedSet(t, "c-old", "c-old-2", "c-old-3")
	h.Runtime.NextIDs = []string{"c-a", "c-b", "c-c"}
	var inFlight sync.WaitGroup
	inFlight.Add(3)
	allIn := make(chan struct{})
	go func() { inFlight.Wait(); close(allIn) }()
	var together atomic.Int64
	h.Runtime.Hook = func(ctx context.Context, method, id string) error {
		if method != coretest.MStop {
			return nil
		}
		inFlight.Done()
		select {
		case <-allIn:
			together.Add(1)
		case <-time.After(2 * time.Second):
		}
		return nil
	}
	res, err := depDeploy(t, h, engine.DeployRequest{}, repWeb(3))
	require.NoError(t, err)
	require.Equal(t, core.OutcomeSuccess, res.Outcome)
	assert.Equal(t, int64(3), together.Load(), "all three stops were in flight at once")
	for _, id := range []string{"c-old", "c-old-2", "c-old-3"} {
		assert.Equal(t, 1, h.Events.Count("remove", id), id)
	}
}
