package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/core/engine"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

// The fault-injection suite: what the crash suite does for kill -9, for
// faults that are not crashes. For every verb (deploy overlap and
// sequential, stop, start, restart, remove), every store write, every
// runtime call and every traffic call it makes is failed in turn (store
// writes with ENOSPC and EIO, backend calls with the backend's error);
// then reconcile runs. After each:
//   - the verb's result says what happened: an error iff its op did not
//     end in success;
//   - after reconcile, what serves is what ACTIVE says serves, every
//     ACTIVE container of a running app runs, and nothing is orphaned: no
//     container ACTIVE does not name, no claim of a gone container, no
//     marker, and no network of a removed app.

// faultStoreWrites are the Store methods that write.
var faultStoreWrites = map[string]bool{
	"EnsureApp": true, "NextRevisionID": true, "SaveRevision": true, "SaveDesired": true, "SaveActive": true,
	"SaveIntent": true, "ClaimOp": true, "SaveOp": true, "SaveMarker": true, "ClearMarker": true,
	"RegisterClaims": true, "ReleaseClaims": true, "SaveOwnership": true, "SaveRecovery": true,
	"EndIncarnation": true, "WriteContainerSecret": true, "DeleteContainerSecrets": true,
}

// faultVerb is one verb under test: setup seeds the harness, run runs it.
type faultVerb struct {
	name  string
	setup func(t *testing.T, h *coretest.Harness)
	// run runs the verb and returns the outcome it reported ("" when it
	// refused before an op) and its error.
	run func(h *coretest.Harness) (core.Outcome, error)
}

func faultVerbs() []faultVerb {
	seed := func(spec core.ServiceSpec) func(t *testing.T, h *coretest.Harness) {
		return func(t *testing.T, h *coretest.Harness) {
			h.SeedServing("blog", coretest.BlogApp(spec), map[string]string{"web": "c-old"}, map[string]map[int]int{"web": {8080: 17000}})
			_, err := h.Engine.Reconcile(h.Ctx(), nil) // route it once
			require.NoError(t, err)
		}
	}
	withVolume := func(s core.ServiceSpec) core.ServiceSpec {
		s.Volumes = []core.VolumeMount{{Name: "data", Path: "/data"}}
		return s
	}
	deploy := func(next core.ServiceSpec, base func(t *testing.T, h *coretest.Harness)) func(t *testing.T, h *coretest.Harness) {
		return func(t *testing.T, h *coretest.Harness) {
			base(t, h)
			_, err := h.Engine.SubmitRevision(h.Ctx(), coretest.BlogApp(next), "sha-next")
			require.NoError(t, err)
		}
	}
	lc := func(f func(*engine.Engine, context.Context, engine.LifecycleRequest) (*engine.OpResult, error)) func(h *coretest.Harness) (core.Outcome, error) {
		return func(h *coretest.Harness) (core.Outcome, error) {
			res, err := f(h.Engine, h.Ctx(), engine.LifecycleRequest{App: "blog"})
			if res == nil {
				return "", err
			}
			return res.Outcome, err
		}
	}
	stopped := func(t *testing.T, h *coretest.Harness) {
		seed(coretest.WebSpec(0))(t, h)
		_, err := h.Engine.Stop(h.Ctx(), engine.LifecycleRequest{App: "blog"})
		require.NoError(t, err)
	}
	doDeploy := func(h *coretest.Harness) (core.Outcome, error) {
		res, err := h.Engine.Deploy(h.Ctx(), engine.DeployRequest{App: "blog"})
		if res == nil {
			return "", err
		}
		return res.Outcome, err
	}
	return []faultVerb{
		{"deploy-overlap", deploy(depNewWeb(0), seed(coretest.WebSpec(0))), doDeploy},
		{"deploy-sequential", deploy(withVolume(depNewWeb(0)), seed(withVolume(coretest.WebSpec(0)))), doDeploy},
		{"stop", seed(coretest.WebSpec(0)), lc((*engine.Engine).Stop)},
		{"start", stopped, lc((*engine.Engine).Start)},
		{"restart", seed(coretest.WebSpec(0)), lc((*engine.Engine).Restart)},
		{"remove", seed(coretest.WebSpec(0)), lc((*engine.Engine).Remove)},
	}
}

// faultPoint is one injected fault: the k-th call of method in layer.
type faultPoint struct {
	layer, method string
	k             int
	err           error
}

func (p faultPoint) String() string {
	return fmt.Sprintf("%s.%s#%d(%v)", p.layer, p.method, p.k, p.err)
}

// faultHarness builds a harness for v whose fakes fail at p (zero p: none)
// and counts every call per layer and method into calls.
func faultHarness(t *testing.T, v faultVerb, p faultPoint, calls map[string]int) *coretest.Harness {
	h := coretest.NewEngine(t)
	h.Engine.Readiness.HTTPInterval = 0
	v.setup(t, h)
	h.Reset()
	var mu sync.Mutex
	armed := true
	hit := func(layer, method string) error {
		mu.Lock()
		defer mu.Unlock()
		key := layer + "." + method
		calls[key]++
		if armed && p.layer == layer && p.method == method && calls[key] == p.k {
			return p.err
		}
		return nil
	}
	h.Store.Hook = func(method string) error {
		if !faultStoreWrites[method] {
			return nil
		}
		return hit("store", method)
	}
	h.Runtime.Hook = func(ctx context.Context, method, id string) error { return hit("runtime", method) }
	h.Traffic.ApplyFn = func(ctx context.Context, g routetable.Graph) error { return hit("traffic", "apply") }
	h.T.Cleanup(func() {
		mu.Lock()
		armed = false
		mu.Unlock()
	})
	return h
}

// disarm removes every fault hook (reconcile then runs fault-free).
func disarm(h *coretest.Harness) {
	h.Store.Hook = nil
	h.Runtime.Hook = nil
	h.Traffic.ApplyFn = nil
}

// checkHonest: the outcome the verb reports (what the CLI's exit status
// is made of: 0 success, 2 partial, 1 failed) is what its journal says,
// and an error comes with a non-success outcome. A verb whose final
// journal save failed may leave its op non-terminal (R14.8: that failure
// is logged; reconcile finishes the record).
func checkHonest(t *testing.T, h *coretest.Harness, v faultVerb, outcome core.Outcome, verr error, finalSaveFailed bool) {
	t.Helper()
	if verr != nil {
		assert.NotEqual(t, core.OutcomeSuccess, outcome, "%s failed (%v) but reported success", v.name, verr)
	}
	op, err := h.Store.LatestOp(context.Background(), "blog")
	if err != nil || outcome == "" {
		return // removed, or refused before any op
	}
	if finalSaveFailed && op.Outcome == "" {
		return
	}
	assert.Equal(t, outcome, op.Outcome, "%s reported %q but its journal %s says %q", v.name, outcome, op.ID, op.Outcome)
}

// reconcileTwice runs two reconcile passes and returns the last error.
func reconcileTwice(h *coretest.Harness) error {
	var err error
	for range 2 {
		_, err = h.Engine.Reconcile(h.Ctx(), nil)
	}
	return err
}

// checkServes: what serves is what ACTIVE says: a running ACTIVE
// container is routed to its recorded binds; one that is gone or stopped
// is not routed at all.
func checkServes(t *testing.T, h *coretest.Harness) {
	t.Helper()
	a, err := h.Store.LoadActive(context.Background(), "blog")
	if err != nil {
		assert.Empty(t, h.LastRoute("blog", "web"), "an app without ACTIVE is routed")
		return
	}
	for name, s := range a.Services {
		if s == nil || s.Container == "" || !h.Runtime.Running(s.Container) {
			assert.Empty(t, h.LastRoute("blog", name), "%s is routed but ACTIVE's container %q does not run", name, s.Container)
			continue
		}
		var ports []int
		for _, hp := range s.BackendBinds {
			ports = append(ports, hp)
		}
		assert.ElementsMatch(t, ports, h.LastRoute("blog", name), "what serves is not what ACTIVE says")
	}
}

// checkClean: nothing is orphaned: every container runs and is ACTIVE's
// (none at all for a stopped or removed app), every claim belongs to an
// existing container, no marker is left, and a removed app has no network.
func checkClean(t *testing.T, h *coretest.Harness) {
	t.Helper()
	ctx := context.Background()
	want := []string{}
	if _, err := h.Store.LoadApp(ctx, "blog"); err == nil {
		intent, err := h.Store.LoadIntent(ctx, "blog")
		require.NoError(t, err)
		a, err := h.Store.LoadActive(ctx, "blog")
		require.NoError(t, err)
		for name, s := range a.Services {
			if s == nil || s.Container == "" || intent.Stopped {
				continue
			}
			want = append(want, s.Container)
			assert.True(t, h.Runtime.Running(s.Container), "ACTIVE blog/%s names %s, which does not run", name, s.Container)
		}
	} else {
		assert.Empty(t, h.Runtime.Networks(), "a removed app's network is left")
	}
	sort.Strings(want)
	got := append([]string{}, h.Runtime.Containers()...)
	sort.Strings(got)
	assert.Equal(t, want, got, "orphaned containers")
	claims, err := h.Store.ListClaims(ctx)
	require.NoError(t, err)
	for _, c := range claims {
		assert.True(t, h.Runtime.Exists(c.Container), "claim %d of gone container %s", c.Port, c.Container)
	}
	assert.Empty(t, h.Store.Markers("blog"), "markers left")
}

func TestFaultSuite_EveryBoundaryConverges(t *testing.T) {
	kinds := []error{
		&os.PathError{Op: "write", Path: "apps/blog/x.json", Err: syscall.ENOSPC},
		&os.PathError{Op: "write", Path: "apps/blog/x.json", Err: syscall.EIO},
	}
	backendErr := fmt.Errorf("backend: %w", core.ErrUnavailable)
	total, converged := 0, 0
	for _, v := range faultVerbs() {
		calls := map[string]int{}
		h := faultHarness(t, v, faultPoint{}, calls)
		outcome, err := v.run(h)
		require.NoError(t, err, "%s without faults", v.name)
		require.Equal(t, core.OutcomeSuccess, outcome)
		keys := make([]string, 0, len(calls))
		for k := range calls {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, key := range keys {
			layer, method, _ := strings.Cut(key, ".")
			errs := []error{backendErr}
			if layer == "store" {
				errs = kinds
			}
			for k := 1; k <= calls[key]; k++ {
				for _, ferr := range errs {
					p := faultPoint{layer: layer, method: method, k: k, err: ferr}
					total++
					ok := t.Run(v.name+"/"+p.String(), func(t *testing.T) {
						h := faultHarness(t, v, p, map[string]int{})
						outcome, verr := v.run(h)
						finalSave := layer == "store" && method == "SaveOp" && k == calls[key]
						checkHonest(t, h, v, outcome, verr, finalSave)
						disarm(h)
						_ = reconcileTwice(h) // may report what only the verb can finish
						checkServes(t, h)
						if verr != nil || outcome != core.OutcomeSuccess {
							// The verb's retry, fault-free, finishes what it left.
							_, aerr := h.Store.LoadApp(context.Background(), "blog")
							_, rerr := v.run(h)
							if v.name == "remove" && errors.Is(aerr, core.ErrNotFound) {
								// Removed; only its last rebuild failed: nothing is left to retry.
								require.ErrorIs(t, rerr, core.ErrNotFound)
							} else {
								require.NoError(t, rerr, "%s retry", v.name)
							}
						}
						require.NoError(t, reconcileTwice(h), "reconcile does not converge")
						checkServes(t, h)
						checkClean(t, h)
					})
					if ok {
						converged++
					}
				}
			}
		}
	}
	t.Logf("fault suite: %d boundaries x kinds, %d converged", total, converged)
}
