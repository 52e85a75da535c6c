package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// storeSnapshot is everything a refused deploy must leave as it was.
func storeSnapshot(t *testing.T, h *coretest.Harness, app string) string {
	t.Helper()
	ctx := context.Background()
	apps, err := h.Store.ListApps(ctx)
	require.NoError(t, err)
	info, ierr := h.Store.LoadApp(ctx, app)
	revs, _ := h.Store.ListRevisions(ctx, app)
	desired, _ := h.Store.LoadDesired(ctx, app)
	ops, _ := h.Store.ListOps(ctx, app)
	active, aerr := h.Store.LoadActive(ctx, app)
	return fmt.Sprintf("apps=%v info=%v/%v revs=%d desired=%q ops=%d active=%v/%v", apps, info, ierr != nil, len(revs), desired, len(ops), active.Services, aerr != nil)
}

// Every check that can refuse runs before the revision, DESIRED or app
// record is written (SPEC R12): a refused first deploy changes nothing.
func TestR12_RefusedFirstDeployStoresNothing(t *testing.T) {
	cases := map[string]struct {
		setup func(h *coretest.Harness)
		spec  func() core.ServiceSpec
		class error
	}{
		"host routed by another app": {
			setup: func(h *coretest.Harness) {
				other := coretest.WebSpec(0)
				h.SeedServing("other", core.AppSpec{Name: "other", Services: []core.ServiceSpec{other}}, map[string]string{"web": "c-other"}, map[string]map[int]int{"web": {8080: 17000}})
			},
			spec:  func() core.ServiceSpec { return coretest.WebSpec(0) },
			class: core.ErrConflict,
		},
		"missing secret": {
			setup: func(h *coretest.Harness) {},
			spec: func() core.ServiceSpec {
				s := coretest.WebSpec(0)
				s.Secrets = []core.SecretRef{{Env: "PGPASSWORD", Name: "pg-password"}}
				return s
			},
			class: core.ErrNotFound,
		},
		"unreachable engine": {
			setup: func(h *coretest.Harness) {
				h.Runtime.Fail(coretest.MInfo, "", fmt.Errorf("cannot connect to the Docker daemon: %w", core.ErrUnavailable), -1)
			},
			spec:  func() core.ServiceSpec { return coretest.WebSpec(0) },
			class: core.ErrUnavailable,
		},
		"image not resolvable": {
			setup: func(h *coretest.Harness) {
				h.Runtime.Fail(coretest.MResolve, "", fmt.Errorf("image: %w", core.ErrNotFound), -1)
				h.Runtime.Fail(coretest.MPull, "", fmt.Errorf("pull: %w", core.ErrNotFound), -1)
			},
			spec:  func() core.ServiceSpec { return coretest.WebSpec(0) },
			class: core.ErrNotFound,
		},
	}
	for name, tc := range cases {
		// deploy -f checks under the deploy's lock (Deploy with Submit);
		// SubmitChecked is the same checks alone.
		for _, via := range []string{"SubmitChecked", "Deploy+Submit"} {
			t.Run(name+"/"+via, func(t *testing.T) {
				h := coretest.NewEngine(t)
				tc.setup(h)
				before := storeSnapshot(t, h, "blog")
				var err error
				if via == "SubmitChecked" {
					_, err = h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(tc.spec()), "sha", "")
				} else {
					_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Submit: &engine.Submission{Spec: coretest.BlogApp(tc.spec()), SourceSHA256: "sha"}})
				}
				require.Error(t, err)
				assert.ErrorIs(t, err, tc.class)
				assert.Equal(t, before, storeSnapshot(t, h, "blog"), "a refused deploy changed the store")
				assert.Empty(t, h.Runtime.Created(), "a refused deploy created a container")
			})
		}
	}
}

// R13: an image neither on the engine nor pullable is refused with what to
// do about it (build, load, name, login, --copy-images) and its class.
func TestR13_MissingImageErrorSaysWhatToDo(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Runtime.Fail(coretest.MResolve, "", fmt.Errorf("image: %w", core.ErrNotFound), -1)
	h.Runtime.Fail(coretest.MPull, "", fmt.Errorf("pull: dial tcp: lookup registry-1.docker.io: %w", core.ErrUnavailable), -1)
	_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", "")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrUnavailable)
	for _, want := range []string{"is not on the engine, and pulling it failed", "lookup registry-1.docker.io", "docker build -t", "docker load", "docker login", "--copy-images"} {
		assert.Contains(t, err.Error(), want)
	}
}

// On a swarm (Engine.RegistryOnly) the advice is the registry's: every
// node pulls the image, so nothing built or loaded on one engine, and no
// --copy-images.
func TestR13_MissingImageOnASwarmSaysPushItToARegistry(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Engine.RegistryOnly = true
	h.Runtime.Fail(coretest.MResolve, "", fmt.Errorf("image: %w", core.ErrNotFound), -1)
	h.Runtime.Fail(coretest.MPull, "", fmt.Errorf("pull: manifest unknown: %w", core.ErrNotFound), -1)
	_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", "")
	require.Error(t, err)
	assert.ErrorIs(t, err, core.ErrNotFound)
	assert.Contains(t, err.Error(), "every node pulls it from a registry")
	assert.Contains(t, err.Error(), "docker push")
	assert.NotContains(t, err.Error(), "--copy-images")
	assert.NotContains(t, err.Error(), "docker load")
}

// The missing-secret refusal is one statement of what is missing and how to
// set it (no repeated names, no "state conflict").
func TestR12_MissingSecretErrorSaysWhatToDo(t *testing.T) {
	h := coretest.NewEngine(t)
	s := coretest.WebSpec(0)
	s.Secrets = []core.SecretRef{{Env: "PGPASSWORD", Name: "pg-password"}}
	_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(s), "sha", "")
	require.Error(t, err)
	assert.NotErrorIs(t, err, core.ErrConflict)
	assert.Equal(t, `deploy blog: service web: not found: secret "pg-password" is not set (set it with: docker gordon secrets set blog web pg-password, or for every service: docker gordon secrets set blog pg-password)`, err.Error())
}

// SPEC R13 volume ownership: a volume of the same name owned by another
// app, an earlier incarnation or nobody is refused unless adopted.
func TestR13_VolumeOwnedElsewhereIsRefusedUnlessAdopted(t *testing.T) {
	vol := func(adopt bool) core.ServiceSpec {
		s := coretest.WebSpec(0)
		s.Volumes = []core.VolumeMount{{Name: "data", Path: "/data", Adopt: adopt}}
		return s
	}
	owners := map[string]map[string]string{
		"other app":         {core.LabelManaged: "true", core.LabelApp: "blog-x", core.LabelIncarnation: "inc-x"},
		"older incarnation": {core.LabelManaged: "true", core.LabelApp: "blog", core.LabelIncarnation: "inc-gone"},
		"unlabelled":        nil,
	}
	for name, labels := range owners {
		t.Run(name, func(t *testing.T) {
			h := coretest.NewEngine(t)
			h.Runtime.AddVolume(engine.VolumeName("blog", "data"), labels)
			before := storeSnapshot(t, h, "blog")
			_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(vol(false)), "sha", "")
			require.Error(t, err)
			assert.ErrorIs(t, err, core.ErrConflict)
			assert.Contains(t, err.Error(), "adopt = true")
			assert.Equal(t, before, storeSnapshot(t, h, "blog"))

			rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(vol(true)), "sha", "")
			require.NoError(t, err)
			_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
			require.NoError(t, err)
		})
	}
}

// A volume this incarnation created is reused by its next deploy; after
// remove (a new incarnation) the same manifest is refused until adopted.
func TestR13_VolumeOfRemovedIncarnationNeedsAdopt(t *testing.T) {
	h := coretest.NewEngine(t)
	s := coretest.WebSpec(0)
	s.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(s), "sha", "")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	s2 := s
	s2.Image = "registry.example/blog:1.5"
	_, err = h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(s2), "sha2", "")
	require.NoError(t, err, "the owning incarnation reuses its own volume")

	_, err = h.Engine.Remove(h.Ctx(), engine.LifecycleRequest{App: "blog"})
	require.NoError(t, err)
	_, err = h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(s), "sha", "")
	require.Error(t, err)
	assert.True(t, errors.Is(err, core.ErrConflict), err)
	assert.Contains(t, err.Error(), "earlier incarnation")
}

// A traffic backend serving another state directory refuses the deploy
// before anything is created or stored.
func TestR12_ForeignEdgeRefusesBeforeAnything(t *testing.T) {
	h := coretest.NewEngine(t)
	h.Traffic.StatusFn = func(ctx context.Context) (core.TrafficStatus, error) {
		return core.TrafficStatus{}, fmt.Errorf("the edge serves another state directory: %w", core.ErrConflict)
	}
	before := storeSnapshot(t, h, "blog")
	_, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", "")
	require.ErrorIs(t, err, core.ErrConflict)
	assert.Contains(t, err.Error(), "another state directory")
	assert.Equal(t, before, storeSnapshot(t, h, "blog"))
	assert.Empty(t, h.Runtime.Created())
	assert.Zero(t, h.Runtime.Calls(coretest.MEnsureNetwork))
}

// An app-wide secret (secrets set APP NAME) serves every service that
// refers to it: one value for two services, set once.
func TestSecrets_AppWideSecretServesEveryService(t *testing.T) {
	h := coretest.NewEngine(t)
	_, err := h.Store.EnsureApp(h.Ctx(), "blog")
	require.NoError(t, err)
	require.NoError(t, h.Store.SetSecret(h.Ctx(), "blog", core.AppWideSecrets, "pg-password", []byte("s3cret")))
	web := coretest.WebSpec(0)
	web.Secrets = []core.SecretRef{{Env: "PGPASSWORD", Name: "pg-password"}}
	worker := core.ServiceSpec{Name: "worker", Image: "registry.example/worker:1", Secrets: []core.SecretRef{{Env: "DB_PASSWORD", Name: "pg-password"}}}
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(web, worker), "sha", "")
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID})
	require.NoError(t, err)
	envs := map[string][]string{}
	for _, c := range h.Runtime.Created() {
		envs[c.Labels[core.LabelService]] = c.Env
	}
	assert.Contains(t, envs["web"], "PGPASSWORD=s3cret")
	assert.Contains(t, envs["worker"], "DB_PASSWORD=s3cret")
}

// The images CheckDeployable resolved are not resolved (or pulled) again by
// the same command's deploy: --pull=always pulls once.
func TestR13_CheckedImagesArePulledOnce(t *testing.T) {
	h := coretest.NewEngine(t)
	rev, err := h.Engine.SubmitChecked(h.Ctx(), coretest.BlogApp(coretest.WebSpec(0)), "sha", engine.PullAlways)
	require.NoError(t, err)
	_, err = h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog", Revision: rev.ID, Pull: engine.PullAlways})
	require.NoError(t, err)
	assert.Equal(t, 1, h.Events.Count("pull", "registry.example/blog:1.4"))
	assert.Equal(t, 1, h.Runtime.Calls(coretest.MResolve))
}
