package steps

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
)

type routesGolden struct {
	Actives []core.Active    `json:"actives"`
	Graph   routetable.Graph `json:"graph"`
}

// TestDecision11_BuildGraphGolden checks BuildGraph against
// testdata/routes/*.json (set GORDON_UPDATE_GOLDEN=1 to rewrite "graph").
func TestDecision11_BuildGraphGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/routes/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var g routesGolden
			require.NoError(t, json.Unmarshal(b, &g))
			got := BuildGraph(g.Actives)
			if os.Getenv("GORDON_UPDATE_GOLDEN") == "1" {
				g.Graph = got
				out, err := json.MarshalIndent(g, "", "  ")
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(f, append(out, '\n'), 0o644))
				return
			}
			wantJSON, err := json.Marshal(g.Graph)
			require.NoError(t, err)
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, string(wantJSON), string(gotJSON))
		})
	}
}

// TestDecision11_BuildGraphDeterministic: map iteration order never leaks
// into the graph, and the input is not modified.
func TestDecision11_BuildGraphDeterministic(t *testing.T) {
	b, err := os.ReadFile("testdata/routes/mixed-apps.json")
	require.NoError(t, err)
	var g routesGolden
	require.NoError(t, json.Unmarshal(b, &g))
	before, _ := json.Marshal(g.Actives)
	first, _ := json.Marshal(BuildGraph(g.Actives))
	for i := 0; i < 20; i++ {
		again, _ := json.Marshal(BuildGraph(g.Actives))
		require.Equal(t, string(first), string(again))
	}
	after, _ := json.Marshal(g.Actives)
	assert.Equal(t, string(before), string(after))
}

// drainTraffic is a minimal Traffic for waitDrained: Status reports the
// next count of seq for addr (the last repeats) or statusErr.
type drainTraffic struct {
	mu        sync.Mutex
	addr      string
	seq       []int64
	calls     int
	statusErr error
}

func (d *drainTraffic) Apply(context.Context, routetable.Graph) (uint64, error) { return 1, nil }
func (d *drainTraffic) Status(context.Context) (core.TrafficStatus, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.statusErr != nil {
		return core.TrafficStatus{}, d.statusErr
	}
	n := d.seq[0]
	if len(d.seq) > 1 {
		d.seq = d.seq[1:]
	}
	return core.TrafficStatus{AppliedGeneration: 1, Backends: []routetable.BackendStatus{{Addr: d.addr, InFlight: n}}}, nil
}

// TestDecision16_WaitDrainedReturnsWhenInFlightZero polls until the edge
// reports zero in-flight requests on the backend.
func TestDecision16_WaitDrainedReturnsWhenInFlightZero(t *testing.T) {
	tr := &drainTraffic{addr: "127.0.0.1:17000", seq: []int64{3, 2, 0}}
	e := &Engine{Traffic: tr, DrainPoll: time.Millisecond}
	_, err := e.WaitDrained(context.Background(), "127.0.0.1:17000", 5*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 3, tr.calls)
}

// TestDecision16_WaitDrainedLimitIsNotAnError: a backend that never drains
// is waited for at most the limit; reaching it is not an error.
func TestDecision16_WaitDrainedLimitIsNotAnError(t *testing.T) {
	tr := &drainTraffic{addr: "127.0.0.1:17000", seq: []int64{1}}
	e := &Engine{Traffic: tr, DrainPoll: 5 * time.Millisecond}
	start := time.Now()
	waited, err := e.WaitDrained(context.Background(), "127.0.0.1:17000", 60*time.Millisecond)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, waited, 60*time.Millisecond)
	assert.Less(t, time.Since(start), 2*time.Second)
	assert.Greater(t, tr.calls, 2)

	tr2 := &drainTraffic{statusErr: errors.New("edge status unreadable")}
	e2 := &Engine{Traffic: tr2, DrainPoll: 5 * time.Millisecond}
	_, err = e2.WaitDrained(context.Background(), "127.0.0.1:17000", 30*time.Millisecond)
	require.NoError(t, err, "a status failure until the limit is logged, not returned")
}

// TestDecision16_WaitDrainedCallerCancel returns the caller's error.
func TestDecision16_WaitDrainedCallerCancel(t *testing.T) {
	tr := &drainTraffic{addr: "a", seq: []int64{1}}
	e := &Engine{Traffic: tr, DrainPoll: 5 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := e.WaitDrained(ctx, "a", 10*time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestDecision16_DrainLimit is min(grace (0 → 30 s), 30 s) unless
// DrainTimeout is set.
func TestDecision16_DrainLimit(t *testing.T) {
	e := &Engine{}
	assert.Equal(t, 30*time.Second, e.DrainLimit(0))
	assert.Equal(t, 3*time.Second, e.DrainLimit(3*time.Second))
	assert.Equal(t, 30*time.Second, e.DrainLimit(2*time.Minute))
	e.DrainTimeout = 7 * time.Second
	assert.Equal(t, 7*time.Second, e.DrainLimit(time.Second))
}

// TestR25_EffectiveGrace: declared grace when > 0, else 30 s.
func TestR25_EffectiveGrace(t *testing.T) {
	assert.Equal(t, 30*time.Second, EffectiveGrace(0))
	assert.Equal(t, 45*time.Second, EffectiveGrace(core.Duration(45*time.Second)))
	assert.Equal(t, 30*time.Second, EffectiveGrace(core.Duration(-time.Second)))
}

// An HTTP interface's response_timeout reaches the route table as
// response_header_timeout_ms (0 when unset: the edge's default).
func TestBuildGraphCarriesResponseTimeout(t *testing.T) {
	spec := core.ServiceSpec{Name: "web", HTTP: []core.HTTPInterface{
		{Port: 80, Host: "a.example", Visibility: core.VisibilityPublic, ResponseTimeout: core.Duration(90 * time.Second)},
		{Port: 81, Host: "b.example", Visibility: core.VisibilityPublic},
	}}
	g := BuildGraph([]core.Active{{App: "blog", Services: map[string]*core.ActiveService{
		"web": {Container: "c1", Spec: spec, BackendBinds: map[int]int{80: 30001, 81: 30002}},
	}}})
	require.Len(t, g.HTTP, 2)
	assert.Equal(t, int64(90000), g.HTTP[0].ResponseHeaderTimeoutMS)
	assert.Equal(t, int64(0), g.HTTP[1].ResponseHeaderTimeoutMS)
}
