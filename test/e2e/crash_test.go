package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/test/e2e/fixture"
	"github.com/gordon-deploy/docker-gordon/test/testimages"
)

// Crash safety (SPEC R45–R48, ARCHITECTURE §6 "a crash anywhere leaves a
// journal and markers from which reconcile converges"). The deploy is
// killed with a real SIGKILL at a random moment (killmatrix_test.go kills
// every flow at every journal boundary) and one
// `docker gordon reconcile` must bring the app back to: one container, the
// one ACTIVE names, routed by the edge, no marker, latest op terminal.

// httpIdent is what identifies an httpd process: its random instance id.
func httpIdent(body string) string { return instanceOf([]byte(body)) }

// kvIdent identifies a kv generation by the version it serves.
func kvIdent(body string) string { return strings.TrimSpace(body) }

// otherImage returns whichever of a, b is not cur.
func otherImage(cur, a, b string) string {
	if cur == a {
		return b
	}
	return a
}

// appStatusImage is ACTIVE's image of the app's only service ("" if none).
func appStatusImage(t testing.TB, state, app string) string {
	r := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "status", app, "--format", "json")
	if i := strings.Index(r.Stdout, `"image": "`); i >= 0 {
		rest := r.Stdout[i+len(`"image": "`):]
		return rest[:strings.IndexByte(rest, '"')]
	}
	return ""
}

// TestR45_RandomKill9Deploys kills overlap deploys with kill -9 at a
// uniformly random moment 0–3 s after start; one reconcile after each must
// restore the invariants.
func TestR45_RandomKill9Deploys(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	v2 := testimages.Require(t, "v2", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2ecrashrnd")
	state, app, edge, file := a.State, a.Name, a.Edge, a.File
	host := "crashrnd.test"

	fixture.WriteFile(t, file, webManifest(app, v1, host, ""))
	r := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())
	cur := checkConverged(t, state, app, "web", edge, host, "/", httpIdent)

	deploys := 20
	if testing.Short() {
		deploys = 5
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b9))
	t.Logf("seed %d", seed)
	killed := 0
	for i := 0; i < deploys; i++ {
		delay := time.Duration(rng.Int64N(int64(3 * time.Second)))
		ok := t.Run(fmt.Sprintf("deploy%02d_kill_after_%s", i, delay.Round(time.Millisecond)), func(t *testing.T) {
			fixture.WriteFile(t, file, webManifest(app, otherImage(cur.Image, v1, v2), host, ""))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd, so, se := fixture.Command(ctx, fixture.NormalBin(), state, nil, "deploy", "-f", file)
			t0 := time.Now()
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			var err error
			select {
			case err = <-done:
			case <-time.After(delay):
				_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
				err = <-done
			}
			cr := fixture.Finish(err, so, se, t0)
			t.Logf("deploy %s: killed=%v exit=%d after %s", otherImage(cur.Image, v1, v2), cr.Killed, cr.Code, cr.Elapsed.Round(time.Millisecond))
			if cr.Killed {
				killed++
			} else {
				require.Equal(t, 0, cr.Code, "a deploy that finished before the kill succeeded: %s", cr.String())
			}
			assert.Empty(t, waitNoPlugins(fixture.NormalBin(), 3*time.Second), "plugins died with the killed CLI")
			rec := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "reconcile", app)
			require.Equal(t, 0, rec.Code, "reconcile after kill -9 at %s: %s", delay, rec.String())
			cur = checkConverged(t, state, app, "web", edge, host, "/", httpIdent)
		})
		if !ok {
			cur = converged{Image: appStatusImage(t, state, app)}
		}
	}
	t.Logf("%d of %d deploys were killed before they finished", killed, deploys)
}

// TestPluginLifetime_NoPluginOutlivesKilledCLI: a deploy waits on a candidate that
// never becomes ready; killing the CLI (kill -9, then Ctrl-C) leaves no
// backend plugin process behind within 3 s, and Ctrl-C makes the CLI exit
// promptly.
func TestPluginLifetime_NoPluginOutlivesKilledCLI(t *testing.T) {
	v1 := testimages.Require(t, "v1", "httpd")["httpd"]
	a := fixture.NewApp(t, "e2enoorphan")
	state, app, file := a.State, a.Name, a.File
	host := "noorphan.test"
	fixture.WriteFile(t, file, webManifest(app, v1, host, ""))
	r := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "deploy", "-f", file)
	require.Equal(t, 0, r.Code, r.String())

	never := strings.Replace(webManifest(app, v1, host, "[services.web.env]\nNEVER_READY = \"true\"\n"), `timeout = "20s"`, `timeout = "60s"`, 1)
	fixture.WriteFile(t, file, never)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT} {
		name := map[syscall.Signal]string{syscall.SIGKILL: "kill-9", syscall.SIGINT: "ctrl-c"}[sig]
		t.Run(name, func(t *testing.T) {
			rec := fixture.RunCLI(t, fixture.NormalBin(), state, nil, "reconcile", app) // clear the previous round's candidate
			require.Equal(t, 0, rec.Code, rec.String())
			require.Empty(t, waitNoPlugins(fixture.NormalBin(), 3*time.Second), "no plugin runs before the deploy")

			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd, so, se := fixture.Command(ctx, fixture.NormalBin(), state, nil, "deploy", "-f", file)
			t0 := time.Now()
			require.NoError(t, cmd.Start())
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()

			// Wait until the candidate exists and is being probed: by then
			// the runtime, traffic and probe plugins have all been started.
			var ended error
			endedEarly := false
			probed := assert.Eventually(t, func() bool {
				select {
				case ended = <-done:
					endedEarly = true
					return true
				default:
				}
				return len(fixture.Managed(t, app, "web")) >= 2 && len(pluginProcs(fixture.NormalBin())) >= 3
			}, 30*time.Second, 100*time.Millisecond)
			if endedEarly {
				t.Fatalf("deploy ended before being killed: %v\n%s", ended, fixture.Finish(ended, so, se, t0).String())
			}
			require.True(t, probed, "no candidate and 3 plugins within 30s; plugins %v", pluginProcs(fixture.NormalBin()))
			// The kill lands while the candidate is probed, not at its
			// create: the state this test is about is "a deploy in its
			// readiness wait", which has no event the CLI reports.
			time.Sleep(500 * time.Millisecond)
			plugins := pluginProcs(fixture.NormalBin())
			t.Logf("plugin processes before %s: %v", sig, plugins)
			require.GreaterOrEqual(t, len(plugins), 3)

			sent := time.Now()
			require.NoError(t, syscall.Kill(cmd.Process.Pid, sig))
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				err = <-done
				t.Errorf("CLI still running 10s after %s", sig)
			}
			exited := time.Since(sent)
			cr := fixture.Finish(err, so, se, t0)
			t.Logf("CLI exited %s after %s: code %d killed %v", exited.Round(time.Millisecond), sig, cr.Code, cr.Killed)
			if sig == syscall.SIGINT {
				assert.Less(t, exited, 5*time.Second, "Ctrl-C ends the CLI promptly: %s", cr.String())
				assert.NotEqual(t, 0, cr.Code, "an interrupted deploy does not report success: %s", cr.String())
			} else {
				assert.True(t, cr.Killed, cr.String())
			}
			left := waitNoPlugins(fixture.NormalBin(), 3*time.Second)
			for _, pid := range left {
				cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
				t.Logf("surviving plugin %d: %q", pid, cmdline)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			require.Empty(t, left, "no plugin process outlives the CLI (%s) by more than 3 s", sig)
		})
	}
}
