package e2e

import (
	"context"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// startedAt is when the engine last started id (docker inspect).
func startedAt(t *testing.T, id string) time.Time {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", "{{.State.StartedAt}}", id).Output()
	require.NoError(t, err)
	ts, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(out)))
	require.NoError(t, err)
	return ts
}

// containerIP is id's address on network (docker inspect).
func containerIP(t *testing.T, id, network string) string {
	t.Helper()
	out, err := exec.Command("docker", "inspect", "-f", `{{with index .NetworkSettings.Networks "`+network+`"}}{{.IPAddress}}{{end}}`, id).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// R18 + R41 against the real engine: two apps behind one edge, with the
// watcher (`reconcile --watch`, passes only on engine events: the interval
// is an hour). `docker kill` of app A's container makes its restart policy
// revive it; the edge routes A's host to the revived process within 2 s of
// the engine starting it again (its State.StartedAt), and no request for
// A's host is ever answered by app B.
func TestR41_RevivedByRestartPolicyRoutedAtItsAddressWithin2sNeverToAnotherApp(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2erevive")
	appB := "e2erevother"
	fixture.CleanupApp(t, appB)
	a.MustDeploy(webManifest(a.Name, v1, "revive.test", ""))
	fileB := a.File + ".other.toml"
	fixture.WriteFile(t, fileB, webManifest(appB, v1, "other.test", ""))
	r := a.Gordon("deploy", "-f", fileB)
	require.Equal(t, 0, r.Code, r.String())

	st := appStatusJSON(t, a.State, a.Name)
	require.Len(t, st.Services, 1)
	svc := st.Services[0]
	require.NotEmpty(t, svc.IP, "status reports the instance's address: %+v", svc)
	require.Equal(t, containerIP(t, svc.Container, "gordon-"+a.Name), svc.IP, "the address is the container's IP on the app network")

	get := func(host string) (int, string) {
		code, body, err := a.Edge.Get(host, "/")
		if err != nil {
			return 0, err.Error()
		}
		return code, body
	}
	code, body := get("revive.test")
	require.Equal(t, 200, code, body)
	oldA := instanceOf([]byte(body))
	code, body = get("other.test")
	require.Equal(t, 200, code, body)
	instB := instanceOf([]byte(body))

	ctx, cancel := context.WithCancel(context.Background())
	watch, wso, wse := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "reconcile", "--watch", "--interval", "1h")
	require.NoError(t, watch.Start())
	t.Cleanup(func() {
		cancel()
		_ = watch.Wait()
		t.Logf("watcher stdout:\n%s\nstderr:\n%s", fixture.LastLines(wso.String(), 20), fixture.LastLines(wse.String(), 20))
	})
	// The watcher's first pass verifies and routes what runs.
	require.Eventually(t, func() bool { return strings.Contains(wso.String(), a.Name) }, 60*time.Second, 100*time.Millisecond, "the watcher's first pass")

	killed := time.Now()
	require.NoError(t, exec.Command("docker", "kill", svc.Container).Run())
	var revivedAfter time.Duration
	var routedAt time.Time
	var wrong, failed int
	assert.Eventually(t, func() bool {
		code, body := get("revive.test")
		inst := instanceOf([]byte(body))
		switch {
		case code == 200 && inst == instB:
			wrong++
		case code == 200 && inst != oldA:
			routedAt = time.Now()
			revivedAfter = routedAt.Sub(killed)
		case code != 200:
			failed++
		}
		return revivedAfter > 0
	}, 15*time.Second-time.Since(killed), 20*time.Millisecond)
	newIP := containerIP(t, svc.Container, "gordon-"+a.Name)
	require.NotZero(t, revivedAfter, "the revived process is routed")
	sinceStart := routedAt.Sub(startedAt(t, svc.Container))
	t.Logf("killed %s at %s; the engine revived it at %s; routed there %s after the kill, %s after the engine started it; %d requests failed meanwhile",
		svc.Container[:12], svc.IP, newIP, revivedAfter, sinceStart, failed)
	assert.LessOrEqual(t, sinceStart, 2*time.Second, "routed at its address within 2 s of its revival")
	assert.Zero(t, wrong, "no request reached the other app")
	st = appStatusJSON(t, a.State, a.Name)
	assert.Equal(t, newIP, st.Services[0].IP, "ACTIVE records the live address")
	code, body = get("other.test")
	assert.Equal(t, 200, code, body)
	assert.Equal(t, instB, instanceOf([]byte(body)), "the other app is untouched")
}

// R18 against the real engine: two apps behind one edge, with the watcher.
// `docker restart` of both apps' containers at once (their addresses are
// given out again) under a client per host: no request for one app's host
// is ever answered by the other app, and both answer again within 10 s.
func TestR18_TwoAppsAcrossRestartsOfTheirContainersNeverAnswerForEachOther(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2eaddra")
	appB := "e2eaddrb"
	fixture.CleanupApp(t, appB)
	a.MustDeploy(webManifest(a.Name, v1, "a.test", `env = { VERSION = "app-a" }`))
	fileB := a.File + ".b.toml"
	fixture.WriteFile(t, fileB, webManifest(appB, v1, "b.test", `env = { VERSION = "app-b" }`))
	r := a.Gordon("deploy", "-f", fileB)
	require.Equal(t, 0, r.Code, r.String())
	idA := appStatusJSON(t, a.State, a.Name).Services[0].Container
	idB := appStatusJSON(t, a.State, appB).Services[0].Container

	ctx, cancel := context.WithCancel(context.Background())
	watch, wso, wse := fixture.Command(ctx, fixture.NormalBin(), a.State, nil, "reconcile", "--watch", "--interval", "1h")
	require.NoError(t, watch.Start())
	t.Cleanup(func() {
		cancel()
		_ = watch.Wait()
		t.Logf("watcher stdout:\n%s\nstderr:\n%s", fixture.LastLines(wso.String(), 20), fixture.LastLines(wse.String(), 20))
	})
	require.Eventually(t, func() bool { return strings.Contains(wso.String(), appB) }, 60*time.Second, 100*time.Millisecond, "the watcher's first pass")

	results := make(chan pollTally, 2)
	stop := make(chan struct{})
	var pollsA, pollsB atomic.Int64
	poll := func(host, want string, polls *atomic.Int64) { results <- pollHost(t, a.Edge, host, want, polls, stop) }
	go poll("a.test", "app-a", &pollsA)
	go poll("b.test", "app-b", &pollsB)

	restarted := time.Now()
	out, err := exec.Command("docker", "restart", "-t", "1", idA, idB).CombinedOutput()
	require.NoError(t, err, string(out))
	serving := func(host, want string) bool {
		code, body, err := a.Edge.Get(host, "/")
		return err == nil && code == 200 && versionOf(body) == want
	}
	require.Eventually(t, func() bool { return serving("a.test", "app-a") && serving("b.test", "app-b") },
		10*time.Second, 50*time.Millisecond, "both apps answer again within 10 s of the restart")
	back := time.Since(restarted)
	// Keep polling the settled routes for 20 more answers per host: a
	// late wrong answer still counts.
	settledA, settledB := pollsA.Load(), pollsB.Load()
	require.Eventually(t, func() bool { return pollsA.Load() >= settledA+20 && pollsB.Load() >= settledB+20 },
		30*time.Second, 10*time.Millisecond, "20 more polls per host after both answered")
	close(stop)
	ta, tb := <-results, <-results
	t.Logf("both answering %s after `docker restart` began; polls %+v and %+v; A at %s, B at %s", back, ta, tb,
		containerIP(t, idA, "gordon-"+a.Name), containerIP(t, idB, "gordon-"+appB))
	assert.Zero(t, ta.wrong+tb.wrong, "no request reached the other app")
}

// pollTally counts one host's polls: answers from the wanted app, answers
// from another app (each also a test error) and failures.
type pollTally struct{ ok, wrong, failed int }

// pollHost GETs host through edge every 10 ms until stop is closed and
// returns the tally; an answer whose version is not want is a test error.
// polls counts every poll, for a caller that awaits N more.
func pollHost(t *testing.T, edge *fixture.Edge, host, want string, polls *atomic.Int64, stop <-chan struct{}) pollTally {
	var n pollTally
	for {
		select {
		case <-stop:
			return n
		default:
		}
		code, body, err := edge.Get(host, "/")
		switch v := versionOf(body); {
		case err != nil || code != 200:
			n.failed++
		case v == want:
			n.ok++
		default:
			n.wrong++
			t.Errorf("%s answered by %q: %q", host, v, body)
		}
		polls.Add(1)
		time.Sleep(10 * time.Millisecond) // the pacing of a load loop, not a wait
	}
}
