package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

func planWeb() core.ServiceSpec {
	return core.ServiceSpec{
		Name:  "web",
		Image: "img",
		HTTP:  []core.HTTPInterface{{Port: 8080, Host: "blog.example.com", Visibility: core.VisibilityPublic}},
	}
}

func planDB() core.ServiceSpec {
	return core.ServiceSpec{
		Name:    "db",
		Image:   "pg",
		TCP:     []core.L4Interface{{Port: 5432}},
		Volumes: []core.VolumeMount{{Name: "data", Path: "/var/lib/postgresql/data"}},
	}
}

func planRev(svcs ...core.ServiceSpec) core.Revision {
	return core.Revision{ID: "rev-2", App: "blog", Spec: core.AppSpec{Name: "blog", Env: map[string]string{"MODE": "prod"}, Services: svcs}}
}

var (
	imgWeb = core.ImageRef{Ref: "img@sha256:aaa", Digest: "sha256:aaa"}
	imgDB  = core.ImageRef{Ref: "pg@sha256:ddd", Digest: "sha256:ddd"}
)

// serving returns ACTIVE with each spec served by c-<name> at rev-1,
// digests as resolved, binds for every backend port.
func serving(rev core.Revision, resolved map[string]core.ImageRef) (core.Active, map[string]core.ContainerState) {
	a := core.Active{App: "blog", Services: map[string]*core.ActiveService{}}
	obs := map[string]core.ContainerState{}
	port := 17000
	for _, s := range rev.Spec.Services {
		binds := map[int]int{}
		for _, p := range s.BackendPorts() {
			binds[p.Port] = port
			port++
		}
		id := "c-" + s.Name
		a.Services[s.Name] = &core.ActiveService{EffectiveRevision: rev.ID, Image: resolved[s.Name].Ref, Digest: resolved[s.Name].Digest,
			Container: id, Spec: s, BackendBinds: binds}
		obs[id] = core.ContainerState{ID: id, Status: core.StatusRunning, Env: []string{"PATH=/bin", "MODE=prod"}}
	}
	return a, obs
}

// A service nothing serves yet is shown as new: it is started, not
// replaced (its step still runs the sequential flow, with no predecessor).
func TestBuildPlan_FirstDeploymentIsNew(t *testing.T) {
	rev := planRev(planWeb(), planDB())
	p := engine.BuildPlan(rev, core.Active{App: "blog"}, nil, nil, nil, map[string]core.ImageRef{"web": imgWeb, "db": imgDB})
	assert.Equal(t, "app blog, revision rev-2 (full deploy):\n"+
		"  db: new (nothing serves it yet)\n"+
		"    readiness: tcp connect :5432 (default)\n"+
		"  web: new (nothing serves it yet)\n"+
		"    readiness: http GET / on :8080 (default)\n", p.String())
}

func TestBuildPlan_R15_NothingChangedIsUnchanged(t *testing.T) {
	rev := planRev(planWeb(), planDB())
	res := map[string]core.ImageRef{"web": imgWeb, "db": imgDB}
	active, obs := serving(rev, res)
	p := engine.BuildPlan(rev, active, obs, nil, nil, res)
	assert.Equal(t, "app blog, revision rev-2 (full deploy):\n"+
		"  db: unchanged (already running pg@sha256:ddd (sha256:ddd))\n"+
		"  web: unchanged (already running img@sha256:aaa (sha256:aaa))\n", p.String())
}

func TestBuildPlan_R16_DigestChangeChoosesFlowByEligibility(t *testing.T) {
	rev := planRev(planWeb(), planDB())
	res := map[string]core.ImageRef{"web": imgWeb, "db": imgDB}
	active, obs := serving(rev, res)
	next := map[string]core.ImageRef{"web": {Ref: "img@sha256:bbb", Digest: "sha256:bbb"}, "db": {Ref: "pg@sha256:eee", Digest: "sha256:eee"}}
	p := engine.BuildPlan(rev, active, obs, nil, nil, next)
	assert.Equal(t, "app blog, revision rev-2 (full deploy):\n"+
		"  db: sequential (single-writer: volume data), changed: image digest\n"+
		"    readiness: tcp connect :5432 (default)\n"+
		"  web: overlap (stateless: no volume, bind, device or UDP), changed: image digest\n"+
		"    readiness: http GET / on :8080 (default)\n", p.String())
	assert.Equal(t, "c-web", p.Service("web").Before)
}

func TestBuildPlan_R16_PredecessorWithVolumeNeverOverlaps(t *testing.T) {
	old := planWeb()
	old.Volumes = []core.VolumeMount{{Name: "cache", Path: "/cache"}}
	res := map[string]core.ImageRef{"web": imgWeb}
	active, obs := serving(planRev(old), res)
	p := engine.BuildPlan(planRev(planWeb()), active, obs, nil, nil, res)
	assert.Equal(t, "  web: sequential (predecessor single-writer: volume cache), changed: service spec: volumes\n    readiness: http GET / on :8080 (default)\n", p.String()[len("app blog, revision rev-2 (full deploy):\n"):])
}

func TestBuildPlan_R16_UDPAndDeviceAreSequential(t *testing.T) {
	udp := planWeb()
	udp.UDP = []core.L4Interface{{Port: 28015, Publish: "0.0.0.0:28015"}}
	dev := core.ServiceSpec{Name: "gpu", Image: "img", Devices: []string{"/dev/dri"}}
	res := map[string]core.ImageRef{"web": imgWeb, "gpu": imgWeb}
	active, obs := serving(planRev(planWeb(), core.ServiceSpec{Name: "gpu", Image: "img"}), res)
	p := engine.BuildPlan(planRev(udp, dev), active, obs, nil, nil, res)
	require.Len(t, p.Services, 2)
	assert.Equal(t, "  gpu: sequential (exclusive device /dev/dri), changed: devices are always re-resolved\n"+
		"    readiness: none (no HTTP or TCP interface to probe)\n"+
		"  web: sequential (UDP port 28015), changed: service spec: udp\n"+
		"    readiness: tcp connect :8080 (default)\n", p.String()[len("app blog, revision rev-2 (full deploy):\n"):])
}

func TestR15_UnchangedBlockedByEachCondition(t *testing.T) {
	rev := planRev(planWeb())
	res := map[string]core.ImageRef{"web": imgWeb}
	cases := []struct {
		name   string
		mutate func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker)
		change string
	}{
		{"pending withdrawal", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			pw["web"] = true
		}, "pending withdrawal"},
		{"missing bind", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			a.Services["web"].BackendBinds = nil
		}, "no recorded bind for 8080/tcp"},
		{"blocking marker", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			*m = append(*m, core.Marker{App: "blog", Service: "web", Container: "c-web", Reason: core.MarkerReplacementPending})
		}, "container has a replacement-pending marker"},
		{"not running", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			obs["c-web"] = core.ContainerState{ID: "c-web", Status: core.StatusExited}
		}, "container not running"},
		{"env differs", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			obs["c-web"] = core.ContainerState{ID: "c-web", Status: core.StatusRunning, Env: []string{"MODE=dev"}}
		}, "container env"},
		{"app env of effective revision differs", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			a.Services["web"].EffectiveRevision = "rev-1"
		}, "app env"},
		{"shared networks", func(a *core.Active, obs map[string]core.ContainerState, pw map[string]bool, m *[]core.Marker) {
			a.Networks = []string{"shared"}
		}, "shared networks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			active, obs := serving(rev, res)
			pw := map[string]bool{}
			var markers []core.Marker
			c.mutate(&active, obs, pw, &markers)
			p := engine.BuildPlan(rev, active, obs, pw, markers, res)
			ps := p.Service("web")
			require.NotNil(t, ps)
			assert.Equal(t, engine.ActionOverlap, ps.Action)
			assert.Equal(t, c.change, ps.Change)
		})
	}
	// A retirement-pending marker never blocks (R26).
	active, obs := serving(rev, res)
	p := engine.BuildPlan(rev, active, obs, nil, []core.Marker{{App: "blog", Service: "web", Container: "c-web", Reason: core.MarkerRetirementPending}}, res)
	assert.Equal(t, engine.ActionUnchanged, p.Service("web").Action)
}

func TestR56_PlanDropsUndeclaredServicesOnlyOnFullDeploy(t *testing.T) {
	res := map[string]core.ImageRef{"web": imgWeb, "db": imgDB}
	active, obs := serving(planRev(planWeb(), planDB()), res)
	rev := planRev(planWeb())
	p := engine.BuildPlan(rev, active, obs, nil, nil, res)
	assert.Equal(t, "app blog, revision rev-2 (full deploy):\n"+
		"  web: unchanged (already running img@sha256:aaa (sha256:aaa))\n"+
		"  db: remove (no longer declared)\n", p.String())

	in := engine.PlanInput{Revision: rev, Active: active, Observed: obs, Resolved: res, Services: []string{"web"}}
	tp := in.Build()
	assert.Empty(t, tp.Drops)
	assert.True(t, tp.Targeted)
	assert.Contains(t, tp.String(), "(targeted deploy)")
}

// A service declaring replace = "sequential" (compose stop-first) is never
// overlapped, though eligible; replace = "overlap" on an eligible one is.
func TestBuildPlan_R16_DeclaredSequentialNeverOverlaps(t *testing.T) {
	res := map[string]core.ImageRef{"web": imgWeb}
	active, obs := serving(planRev(planWeb()), res)
	next := map[string]core.ImageRef{"web": {Ref: "img@sha256:bbb", Digest: "sha256:bbb"}}
	seq := planWeb()
	seq.Replace = core.ReplaceSequential
	p := engine.BuildPlan(planRev(seq), active, obs, nil, nil, next)
	assert.Equal(t, "  web: sequential (declared replace = \"sequential\"), changed: image digest; also replace\n    readiness: http GET / on :8080 (default)\n", p.String()[len("app blog, revision rev-2 (full deploy):\n"):])
	ov := planWeb()
	ov.Replace = core.ReplaceOverlap
	p = engine.BuildPlan(planRev(ov), active, obs, nil, nil, next)
	assert.Equal(t, engine.ActionOverlap, p.Service("web").Action)
}

// R15: the replacement decision compares the image the service runs, not
// its reference: a build context change that built the same image ID (a
// new tag) replaces nothing, and says so; a plan that has not built the
// new context says the deploy builds it and replaces only on a new image;
// a built image that differs is "image changed".
func TestR15_SameImageUnderANewTagIsUnchanged(t *testing.T) {
	old := planWeb()
	old.Image = "gordon/blog-web:h1"
	res := map[string]core.ImageRef{"web": imgWeb}
	active, obs := serving(planRev(old), res)

	next := planWeb()
	next.Image = "gordon/blog-web:h2"
	p := engine.BuildPlan(planRev(next), active, obs, nil, nil, res)
	assert.Equal(t, engine.ActionUnchanged, p.Service("web").Action)
	assert.Contains(t, p.Service("web").Reason, "gordon/blog-web:h2 is the same image as gordon/blog-web:h1")

	planned := next
	planned.Build = &core.BuildSpec{Context: "/src/web"}
	p = engine.BuildPlan(planRev(planned), active, obs, nil, nil, res)
	assert.Equal(t, engine.ActionUnchanged, p.Service("web").Action)
	assert.Contains(t, p.Service("web").Reason, "build context changed; image unchanged")

	p = engine.BuildPlan(planRev(planned), active, obs, nil, nil, map[string]core.ImageRef{})
	assert.Equal(t, engine.ActionOverlap, p.Service("web").Action)
	assert.Contains(t, p.Service("web").Change, "replaces the service only if the built image differs")

	p = engine.BuildPlan(planRev(planned), active, obs, nil, nil, map[string]core.ImageRef{"web": {Ref: "sha256:bbb", Digest: "sha256:bbb", Local: true}})
	assert.Equal(t, "build context; image changed", p.Service("web").Change)

	changedEnv := next
	changedEnv.Env = map[string]string{"X": "1"}
	p = engine.BuildPlan(planRev(changedEnv), active, obs, nil, nil, res)
	assert.Equal(t, "service spec: env", p.Service("web").Change, "the image reference is no spec change; the env is")
}

// A plan whose image changes also names the manifest keys that change
// with it: an env or stop_grace edit is never hidden behind the image.
func TestBuildPlan_R15_ImageChangeAlsoNamesTheKeysThatChange(t *testing.T) {
	rev := planRev(planWeb())
	active, obs := serving(rev, map[string]core.ImageRef{"web": imgWeb})
	web := planWeb()
	web.Env = map[string]string{"LEVEL": "debug"}
	web.StopGrace = core.Duration(42e9)
	next := planRev(web)
	p := engine.BuildPlan(next, active, obs, nil, nil, map[string]core.ImageRef{"web": {Ref: "img@sha256:bbb", Digest: "sha256:bbb"}})
	assert.Contains(t, p.Service("web").Change, "image digest; also ")
	assert.Contains(t, p.Service("web").Change, "env")
	assert.Contains(t, p.Service("web").Change, "stop_grace")

	p = engine.BuildPlan(rev, active, obs, nil, nil, map[string]core.ImageRef{"web": {Ref: "img@sha256:bbb", Digest: "sha256:bbb"}})
	assert.Equal(t, "image digest", p.Service("web").Change, "nothing else changed: nothing else named")
}
