package dashboard

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/coretest"
	"github.com/gordon-deploy/docker-gordon/journal"
)

// fixture is a journal in a temporary state directory with a fake
// runtime, and the fake edge sources (metrics text, access log lines,
// certificates) a Collector reads.
type fixture struct {
	t        testing.TB
	dir      string
	store    *journal.Store
	rt       *coretest.Runtime
	metrics  func() string
	access   string
	certs    []core.CertInfo
	now      time.Time
	sections func(app string) []Section
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	st, err := journal.Open(dir)
	require.NoError(t, err)
	return &fixture{t: t, dir: dir, store: st, rt: coretest.NewRuntime(&coretest.Events{}), now: time.Now().UTC()}
}

// seedApp journals a serving one-service app "web" at rev-1 with its
// container c-<app> on 10.0.0.<n>:8080 (host port 30000+n), and a
// succeeded deploy op-<app>-1 with its steps.
func (f *fixture) seedApp(app string, n int) {
	f.t.Helper()
	ctx := context.Background()
	info, err := f.store.EnsureApp(ctx, app)
	require.NoError(f.t, err)
	spec := core.AppSpec{Name: app, Services: []core.ServiceSpec{{Name: "web", Image: "gordon-test/httpd:v1",
		HTTP: []core.HTTPInterface{{Port: 8080, Host: app + ".example.com", Visibility: "public"}}}}}
	require.NoError(f.t, f.store.SaveRevision(ctx, core.Revision{ID: "rev-1", App: app, Spec: spec, CreatedAt: f.now}))
	require.NoError(f.t, f.store.SaveDesired(ctx, app, "rev-1"))
	ctr := fmt.Sprintf("c-%s-0123456789abcdef", app)
	binds := map[int]int{8080: 30000 + n}
	require.NoError(f.t, f.store.SaveActive(ctx, core.Active{App: app, Converged: true, ConvergedRevision: "rev-1",
		Services: map[string]*core.ActiveService{"web": {EffectiveRevision: "rev-1", ActivatedBy: "op-" + app + "-1", ActivatedAt: f.now,
			Image: "gordon-test/httpd:v1", Container: ctr, Spec: spec.Services[0], BackendBinds: binds, IP: fmt.Sprintf("10.0.0.%d", n%250+1)}}}))
	f.rt.AddContainer(ctr, core.ContainerState{Name: "gordon-" + app + "-web", Status: core.StatusRunning, StartedAt: f.now.Add(-time.Hour),
		Labels: map[string]string{core.LabelManaged: "true", core.LabelApp: app, core.LabelService: "web", core.LabelIncarnation: info.Incarnation}}, binds)
	op := core.Operation{ID: "op-" + app + "-1", Kind: "deploy", App: app, Revision: "rev-1", StartedAt: f.now.Add(-time.Minute),
		FinishedAt: f.now.Add(-50 * time.Second), Outcome: core.OutcomeSuccess,
		Steps: []core.Step{
			{ID: "service.web.deploy", State: core.StepSucceeded, Service: "web", After: ctr, Detail: "deployed", StartedAt: f.now.Add(-time.Minute), UpdatedAt: f.now.Add(-55 * time.Second),
				Phases: map[string]core.Duration{"create": core.Duration(120 * time.Millisecond), "probe": core.Duration(time.Second)}},
			{ID: "service.web.hook.migrate", State: core.StepSucceeded, Service: "web", Detail: "hook migrate exited 0", Diagnostics: []string{"migrated 3 tables"}},
		}}
	_, claimed, err := f.store.ClaimOp(ctx, op)
	require.NoError(f.t, err)
	require.True(f.t, claimed)
}

func (f *fixture) collector() *Collector {
	c := &Collector{Store: f.store, Runtime: f.rt}
	if f.metrics != nil {
		c.Metrics = func(context.Context) ([]byte, error) { return []byte(f.metrics()), nil }
	}
	if f.access != "" {
		c.AccessLog = func(_ context.Context, w io.Writer) error { _, err := io.WriteString(w, f.access); return err }
	}
	if f.certs != nil {
		c.Certs = func(context.Context) ([]core.CertInfo, error) { return f.certs, nil }
	}
	if f.sections != nil {
		c.Sections = func(_ context.Context, app string) ([]Section, error) { return f.sections(app), nil }
	}
	return c
}

// serve runs the Feed from the fixture (RunLocal, watching the journal,
// interval as given) and an httptest server of the dashboard, both ended
// by the test's cleanup.
func (f *fixture) serve(interval time.Duration, token string) (*httptest.Server, *Feed) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	feed := NewFeed()
	done := make(chan error, 1)
	go func() { done <- RunLocal(ctx, feed, f.collector(), f.dir, interval) }()
	srv := &Server{Feed: feed, Token: token, Engine: "default", Heartbeat: time.Second}
	h, err := srv.Handler()
	require.NoError(f.t, err)
	ts := httptest.NewServer(h)
	f.t.Cleanup(func() {
		ts.Close()
		cancel()
		require.NoError(f.t, <-done)
	})
	return ts, feed
}

func get(t testing.TB, url string, hdr ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = io.Copy(&b, resp.Body)
	return resp.StatusCode, b.String()
}

// metricsText is an exposition of app/web's backend with requests
// (errors of them 5xx) and every request in the 5 ms bucket.
func metricsText(app, backend string, requests, errors int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# TYPE %s counter\n", metricRequests)
	fmt.Fprintf(&b, "%s{app=%q,backend=%q,code=\"2xx\",service=\"web\"} %d\n", metricRequests, app, backend, requests-errors)
	fmt.Fprintf(&b, "%s{app=%q,backend=%q,code=\"5xx\",service=\"web\"} %d\n", metricRequests, app, backend, errors)
	for _, le := range []string{"0.001", "0.005", "0.01", "+Inf"} {
		n := requests
		if le == "0.001" {
			n = 0
		}
		fmt.Fprintf(&b, "%s{app=%q,backend=%q,service=\"web\",le=%q} %d\n", metricDuration, app, backend, le, n)
	}
	return b.String()
}
