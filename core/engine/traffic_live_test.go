package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// staleEdge is a traffic backend whose edge stopped answering at written.
func staleEdge(written time.Time) func(context.Context) (core.TrafficStatus, error) {
	return func(context.Context) (core.TrafficStatus, error) {
		return core.TrafficStatus{AppliedGeneration: 3, Stale: true, UpdatedAt: written}, nil
	}
}

// SPEC R68: a verb that changes routes (publishes routes to new
// containers, or withdraws them) refuses while the edge does not answer, before it changes anything, naming how to
// start the edge; the refusal is ErrUnavailable.
func TestR68_PublishingVerbsRefuseWhileTheEdgeIsDown(t *testing.T) {
	h := coretest.NewEngine(t)
	written := time.Now().Add(-time.Minute)
	h.Engine.TrafficHint = engine.TrafficHint{StateDir: "/srv/state"}
	h.Traffic.StatusFn = staleEdge(written)
	spec := coretest.BlogApp(coretest.WebSpec(0))
	rev, err := h.Engine.SubmitRevision(h.Ctx(), spec, "sha")
	require.NoError(t, err)
	before := storeSnapshot(t, h, "blog")

	verbs := map[string]func() error{
		"deploy": func() error {
			_, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
			return err
		},
		"rollback": func() error {
			_, err := h.Engine.Rollback(h.Ctx(), engine.RollbackRequest{App: "blog"})
			return err
		},
		"start": func() error {
			_, err := h.Engine.Start(h.Ctx(), engine.LifecycleRequest{App: "blog"})
			return err
		},
		"restart": func() error {
			_, err := h.Engine.Restart(h.Ctx(), engine.LifecycleRequest{App: "blog"})
			return err
		},
		// Stop and remove withdraw routes, which the edge must confirm
		// before containers stop: without it they would mark the app
		// stopped and leave it out of service.
		"stop": func() error {
			_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
			return err
		},
		"remove": func() error {
			_, err := h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
			return err
		},
	}
	for verb, run := range verbs {
		start := time.Now()
		err := run()
		require.Error(t, err, verb)
		var down *engine.TrafficDownError
		require.ErrorAs(t, err, &down, verb)
		assert.ErrorIs(t, err, core.ErrUnavailable, verb)
		assert.Equal(t, fmt.Sprintf("%s: the edge proxy is not running: it does not answer on its admin address (last status %s); nothing was changed. Start it with `docker gordon edge start` (or `docker gordon edge run` in another terminal), then retry",
			verb, written.Local().Format(time.RFC3339)), err.Error())
		assert.Less(t, time.Since(start), time.Second, "%s: an edge stopped a minute ago is not waited for", verb)
	}
	assert.Equal(t, before, storeSnapshot(t, h, "blog"), "nothing was stored")
	assert.Empty(t, h.Runtime.Created(), "nothing was created")

	// A dry run only plans: it needs no edge.
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", DryRun: true})
	assert.NoError(t, err)
}

// On a remote engine's machine the refusal names that engine and how to
// start the edge from the user's machine.
func TestR68_RefusalOnARemoteEngineNamesItAndHowToStartTheEdge(t *testing.T) {
	h := coretest.NewEngine(t)
	written := time.Now().Add(-time.Hour)
	h.Engine.TrafficHint = engine.TrafficHint{StateDir: "/var/lib/docker-gordon", Engine: "context prod (ssh://prod, remote)",
		Start: "Start the edge and the reconcile loop there with `docker --context prod gordon system start`"}
	h.Traffic.StatusFn = staleEdge(written)
	err := h.Engine.RequireLiveTraffic(h.Ctx(), "start")
	require.Error(t, err)
	assert.Equal(t, "start: the edge proxy is not running on context prod (ssh://prod, remote): it does not answer on its admin address (last status "+
		written.Local().Format(time.RFC3339)+"); nothing was changed. Start the edge and the reconcile loop there with `docker --context prod gordon system start`, then retry", err.Error())
}

// An edge that never ran (no status at all) may be starting: it gets
// TrafficStartWait, then the refusal says it never ran for the state
// directory.
func TestR68_EdgeThatNeverRanIsWaitedForThenNamed(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.TrafficHint = engine.TrafficHint{StateDir: "/srv/state"}
	var calls atomic.Int32
	h.Traffic.StatusFn = func(context.Context) (core.TrafficStatus, error) {
		calls.Add(1)
		return core.TrafficStatus{}, fmt.Errorf("traffic/edge: edge status: %w", core.ErrUnavailable)
	}
	start := time.Now()
	err := h.Engine.RequireLiveTraffic(h.Ctx(), "deploy")
	require.Error(t, err)
	assert.GreaterOrEqual(t, time.Since(start), engine.TrafficStartWait)
	assert.Greater(t, calls.Load(), int32(2), "asked again while waiting")
	assert.Contains(t, err.Error(), "deploy: the edge proxy is not running: it has never run for state directory /srv/state; nothing was changed.")
}

// A backend whose stale status says why (a swarm: one node's edge does
// not answer, no status file) is quoted, not "never ran".
func TestR68_EdgeThatSaysWhyItIsNotLiveIsQuoted(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.TrafficHint = engine.TrafficHint{StateDir: "/srv/state"}
	h.Traffic.StatusFn = func(context.Context) (core.TrafficStatus, error) {
		return core.TrafficStatus{Stale: true, Error: "node n3: context deadline exceeded"}, nil
	}
	err := h.Engine.RequireLiveTraffic(h.Ctx(), "deploy")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "deploy: the edge proxy is not running: it does not answer: node n3: context deadline exceeded; nothing was changed.")
	assert.NotContains(t, err.Error(), "never run")
}

// An edge that comes up while the verb waits lets it go ahead.
func TestR68_StartingEdgeIsWaitedFor(t *testing.T) {
	h := coretest.NewEngine(t)
	var calls atomic.Int32
	h.Traffic.StatusFn = func(context.Context) (core.TrafficStatus, error) {
		if calls.Add(1) < 3 {
			return core.TrafficStatus{}, fmt.Errorf("no status yet: %w", core.ErrUnavailable)
		}
		return core.TrafficStatus{AppliedGeneration: 1, UpdatedAt: time.Now()}, nil
	}
	require.NoError(t, h.Engine.RequireLiveTraffic(h.Ctx(), "deploy"))
	assert.Equal(t, int32(3), calls.Load())
}

// A live edge, an edge of another state directory (refused by its own
// check, with its own reason) and no traffic backend at all (validate) are
// no refusal of this rule.
func TestR68_LiveForeignOrNoBackendIsNoRefusal(t *testing.T) {
	h := coretest.NewEngine(t)
	assert.NoError(t, h.Engine.RequireLiveTraffic(h.Ctx(), "deploy"), "the fake edge answers")

	h.Traffic.StatusFn = func(context.Context) (core.TrafficStatus, error) {
		return core.TrafficStatus{}, fmt.Errorf("the edge serves another state directory: %w", core.ErrConflict)
	}
	assert.NoError(t, h.Engine.RequireLiveTraffic(h.Ctx(), "deploy"))

	err := (&engine.Engine{}).RequireLiveTraffic(context.Background(), "deploy")
	assert.NoError(t, err)
	assert.False(t, errors.Is(err, core.ErrUnavailable))
}
