package main

import (
	"context"
	"encoding/json"
	"fmt"
	procfs "github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/engine"
)

const (
	latencyReps   = 5
	statusReps    = 5
	reconcileReps = 3
	bulkWorkers   = 4
)

// phaseOrder is the journal's phase split of one overlap deploy, in order.
var phaseOrder = []string{"create", "start", "probe", "switch", "drain", "retire"}

func appName(i int) string { return fmt.Sprintf("%sapp-%03d", appPrefix, i) }

// watchRSS is the memory of one `docker gordon reconcile --watch`.
type watchRSS struct {
	Apps                 int
	CLI, Gordon, Plugins int64 // KiB
	PluginCount          int
	FirstPass            time.Duration
}

// measureApps: deploy latency (2), then with 1, 10 and 100 apps in one
// state directory: status (3), reconcile (5), reconcile --watch memory (6);
// with 1 and 100, the dashboard's apps page and memory (3).
func (b *bench) measureApps(ctx context.Context, s, secCLI, secRec, secMem *section) error {
	state := filepath.Join(b.tmp, "state-apps")
	edge, _, err := b.startEdge(ctx, state, "edge-apps")
	if err != nil {
		return err
	}
	defer edge.Stop()
	if err := b.precreateNetwork(ctx, appName(1)); err != nil {
		return err
	}
	if _, err := b.deployApp(ctx, state, appName(1), b.v1, false); err != nil {
		return err
	}
	if err := b.deployLatency(ctx, s, state); err != nil {
		return err
	}

	secRec.Method = fmt.Sprintf("`docker gordon reconcile` (one pass over every app, nothing to repair) with 1, 10 and %d apps in the state directory; median of %d passes. Engine API calls are counted by a proxy on a unix socket in front of the engine (DOCKER_HOST=unix://…), which sees every request of the docker CLI, docker-gordon and its backend plugins. The apps are real: one-service apps (gordon-test/httpd, HTTP readiness) deployed with `docker gordon deploy`, %d at a time, each with its own running container and journal; their networks gordon-<app> were created beforehand with a /28 subnet so %d bridge networks do not exhaust the engine's default address pools (the deploy reuses an existing network of that name).", b.apps, reconcileReps, bulkWorkers, b.apps)
	secRec.Baseline = "the same pass with 1 app."
	levels := []int{1, 10, b.apps}
	if b.apps <= 10 {
		levels = []int{1, b.apps}
	}
	type level struct {
		status, reconcile           time.Duration
		statusCalls, reconcileCalls int
	}
	res := map[int]level{}
	deployed := 1
	for _, n := range levels {
		if n > deployed {
			t0 := time.Now()
			if err := b.deployMany(ctx, state, deployed+1, n); err != nil {
				return err
			}
			logf("   deployed apps %d..%d in %s", deployed+1, n, time.Since(t0).Round(time.Millisecond))
			deployed = n
		}
		var lv level
		st, calls, err := b.timeGordon(ctx, state, statusReps, "status")
		if err != nil {
			return err
		}
		lv.status, lv.statusCalls = st, calls
		rc, calls, err := b.timeGordon(ctx, state, reconcileReps, "reconcile")
		if err != nil {
			return err
		}
		lv.reconcile, lv.reconcileCalls = rc, calls
		res[n] = lv
		logf("   %d apps: status %s (%d API calls), reconcile %s (%d API calls)", n, st.Round(time.Millisecond), lv.statusCalls, rc.Round(time.Millisecond), calls)
		if n == 1 || n == b.apps {
			w, err := b.watchMemory(ctx, state, n)
			if err != nil {
				return err
			}
			b.watch = append(b.watch, w)
			d, err := b.measureDashboard(ctx, state, n)
			if err != nil {
				return err
			}
			b.dash = append(b.dash, d)
		}
	}
	one := res[1]
	for _, n := range levels {
		lv := res[n]
		secCLI.add(fmt.Sprintf("`docker gordon status`, %d app(s)", n), ms(lv.status), "ms", "status, 1 app", ms(one.status), "")
	}
	for _, n := range levels {
		lv := res[n]
		secCLI.add(fmt.Sprintf("`docker gordon status`, %d app(s): engine API calls", n), float64(lv.statusCalls), "calls", "status, 1 app", float64(one.statusCalls), "")
	}
	for _, n := range levels {
		lv := res[n]
		secRec.add(fmt.Sprintf("reconcile pass, %d app(s): wall time", n), ms(lv.reconcile), "ms", "1 app", ms(one.reconcile), "")
	}
	for _, n := range levels {
		lv := res[n]
		secRec.add(fmt.Sprintf("reconcile pass, %d app(s): engine API calls", n), float64(lv.reconcileCalls), "calls", "1 app", float64(one.reconcileCalls), "")
	}
	reportDashboard(secCLI, b.dash)
	_ = secMem
	return nil
}

// timeGordon runs `docker gordon ARGS` reps times through the proxy (after
// one warm-up) and returns the median wall time and median API calls.
func (b *bench) timeGordon(ctx context.Context, state string, reps int, args ...string) (time.Duration, int, error) {
	var ds []time.Duration
	var calls []int
	for i := -1; i < reps; i++ {
		r := b.gordon(ctx, state, true, args...)
		if err := r.err("docker gordon " + args[0]); err != nil {
			return 0, 0, err
		}
		if i >= 0 {
			ds = append(ds, r.Elapsed())
			calls = append(calls, len(b.proxy.Between(r.Start, r.End)))
		}
	}
	return median(ds), medianInt(calls), nil
}

// deployMany deploys apps from..to (inclusive), bulkWorkers at a time.
func (b *bench) deployMany(ctx context.Context, state string, from, to int) error {
	for i := from; i <= to; i++ {
		if err := b.precreateNetwork(ctx, appName(i)); err != nil {
			return err
		}
	}
	work := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range bulkWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if _, err := b.deployApp(ctx, state, appName(i), b.v1, false); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := from; i <= to; i++ {
		mu.Lock()
		stop := first != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		work <- i
	}
	close(work)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// deployLatency: measurement 2.
func (b *bench) deployLatency(ctx context.Context, s *section, state string) error {
	s.Method = fmt.Sprintf("`docker gordon deploy -f app.toml` of a one-service app whose container is ready at once (gordon-test/httpd, HTTP readiness on /healthz), alternating v1/v2 so every deploy replaces the container; median of %d deploys, engine reached through the counting proxy. Phases come from the journal: \"CLI start, plugins, lock\" is fork of `docker gordon` until the op's started_at (docker CLI and plugin start, runtime and traffic plugin launch, lock, store recovery); preflight, create, start, probe, switch, drain, retire are the journaled phase durations; \"exit\" is the rest (gaps between steps, rendering, plugin shutdown). Engine wait is the union of the time engine API requests were in flight (from the proxy); the engine overhead is the wall time minus the union of engine wait and the probe phase, i.e. the time docker gordon spends on its own (CLI and plugin start, journal writes, the edge switch, …); \"within phase\" splits it over the phase windows (preflight includes the short gap before the service step; the service phases are laid end to end from the step's start, so their windows are approximate).", latencyReps)
	s.Baseline = "`docker run -d -p 127.0.0.1:PORT:8080` of the same image through the same proxy, until the first 200 from /healthz (median of 5); its own overhead is its wall time minus its engine wait. Phases: ratio = share of the deploy's wall time."
	app := appName(1)
	ls := latencySamples{phases: map[string][]time.Duration{}, ownTime: map[string][]time.Duration{}}
	for i := range latencyReps {
		img := b.v2
		if i%2 == 1 {
			img = b.v1
		}
		if err := b.deployLatencyOnce(ctx, state, app, img, i, &ls); err != nil {
			return err
		}
	}
	firsts, err := b.firstDeploys(ctx, state)
	if err != nil {
		return err
	}
	bl, err := b.dockerRunBaseline(ctx)
	if err != nil {
		return err
	}
	onNet, err := b.dockerRunOnNetwork(ctx, "gordon-"+app)
	if err != nil {
		return err
	}
	reportDeployLatency(s, &ls, bl, b.deploySwitch, b.probePluginStart)
	s.add("`docker run -d --network <the app's network>` + first 200 at the container's IP (instance addressing on the app network)", ms(median(onNet)), "ms", "`docker run -d -p` + first 200", ms(median(bl.total)), "")
	s.note("On the app's own bridge network, which gives each instance an address no other app holds, the engine alone takes %.0f ms to run a container until its first 200, against %.0f ms with `-p` on the default bridge.", ms(median(onNet)), ms(median(bl.total)))
	s.extra("baseline_docker_run_on_network_ns", onNet)
	s.add("first deploy of a new one-service app (nothing to retire; its network exists)", ms(median(firsts)), "ms", "`docker run -d` + first 200", ms(median(bl.total)), "")
	s.note("A first deploy (no old container to stop and remove, the engine work `docker run -d` does) takes %.0f ms, %.2f× `docker run -d` + first 200.", ms(median(firsts)), ms(median(firsts))/ms(median(bl.total)))
	s.extra("first_deploy_wall_ns", firsts)
	return nil
}

// dockerRunOnNetwork runs the test image 5 times with `docker run -d
// --network net` (no published port) until its first 200 from /healthz at
// the container's IP on net, and returns each run's time to that 200.
func (b *bench) dockerRunOnNetwork(ctx context.Context, net string) ([]time.Duration, error) {
	var out []time.Duration
	env := []string{"DOCKER_HOST=" + b.proxy.Host(), "DOCKER_CONFIG=" + b.dockerConfig}
	for i := range 5 {
		name := fmt.Sprintf("%s-net-%d", runBaseName, i)
		r := run(ctx, env, "docker", "run", "-d", "--name", name, "--label", benchLabel+"=1", "--network", net, b.v1)
		if err := r.err("docker run --network"); err != nil {
			return nil, err
		}
		ip := run(ctx, env, "docker", "inspect", "-f", "{{(index .NetworkSettings.Networks \""+net+"\").IPAddress}}", name)
		if err := ip.err("docker inspect"); err != nil {
			return nil, err
		}
		ready, err := waitHTTP200(ctx, "http://"+strings.TrimSpace(ip.Stdout)+":8080/healthz", "", 20*time.Second)
		if err != nil {
			return nil, err
		}
		out = append(out, ready.Sub(r.Start))
		if err := b.removeContainer(ctx, name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// firstDeploys deploys 5 new one-service apps (each on a network created
// beforehand, as `docker run -d` uses an existing one) and returns each
// deploy's wall time; each app is removed after its deploy.
func (b *bench) firstDeploys(ctx context.Context, state string) ([]time.Duration, error) {
	var out []time.Duration
	for i := range 5 {
		app := fmt.Sprintf("gbench-first-%d", i)
		if err := b.precreateNetwork(ctx, app); err != nil {
			return nil, err
		}
		r, err := b.deployApp(ctx, state, app, b.v1, true)
		if err != nil {
			return nil, err
		}
		out = append(out, r.End.Sub(r.Start))
		if err := b.gordon(ctx, state, false, "remove", app).err("remove " + app); err != nil {
			return nil, err
		}
	}
	logf("   first deploys of a new app: %v", out)
	return out, nil
}

// latencySamples are the deploy latency figures, one entry per deploy
// (phases and ownTime by phase name).
type latencySamples struct {
	totals, engineWait, overhead []time.Duration
	calls                        []int
	phases, ownTime              map[string][]time.Duration
	allCalls                     []apiCall
}

// deployLatencyOnce deploys img (deploy i) and adds its wall time, its
// journaled phases, its engine wait and its own time per phase window to
// ls (and its switch phase to b.deploySwitch).
func (b *bench) deployLatencyOnce(ctx context.Context, state, app, img string, i int, ls *latencySamples) error {
	r, err := b.deployApp(ctx, state, app, img, true)
	if err != nil {
		return err
	}
	var op core.Operation
	if err := json.Unmarshal([]byte(r.Stdout), &op); err != nil {
		return fmt.Errorf("deploy --format json: %w: %s", err, tail(r.Stdout, 300))
	}
	var svc, pre *core.Step
	for j := range op.Steps {
		switch {
		case op.Steps[j].ID == engine.StepPreflight:
			pre = &op.Steps[j]
		case op.Steps[j].Service != "":
			svc = &op.Steps[j]
		}
	}
	if svc == nil || pre == nil {
		return fmt.Errorf("deploy op %s has no preflight or service step", op.ID)
	}
	start, end := r.Start.Round(0), r.End.Round(0)
	total := end.Sub(start)
	got := map[string]time.Duration{
		"CLI start, plugins, lock": op.StartedAt.Sub(start),
		"preflight":                pre.Phases["preflight"].D(),
	}
	sum := got["CLI start, plugins, lock"] + got["preflight"]
	for _, p := range phaseOrder {
		got[p] = svc.Phases[p].D()
		sum += got[p]
	}
	got["exit (gaps, render, plugin shutdown)"] = total - sum
	for k, v := range got {
		ls.phases[k] = append(ls.phases[k], v)
	}
	// The lock wait is inside "CLI start, plugins, lock" (journaled on
	// the preflight step; not part of the sum).
	ls.phases["lock wait"] = append(ls.phases["lock wait"], pre.Phases["lock"].D())
	cs := b.proxy.Between(r.Start, r.End)
	ls.allCalls = append(ls.allCalls, cs...)
	spans := waitSpans(cs)
	probeStart := svc.StartedAt.Add(svc.Phases["create"].D() + svc.Phases["start"].D())
	probe := interval{probeStart, probeStart.Add(svc.Phases["probe"].D())}
	// Own time (neither engine nor probe) per phase window: the
	// windows are [fork, started_at], the preflight step, the service
	// step's phases laid end to end from its start, and the rest.
	busy := append(spans, probe)
	own := func(a, z time.Time) time.Duration {
		if !z.After(a) {
			return 0
		}
		return z.Sub(a) - unionLen(busy, a, z)
	}
	ls.ownTime["CLI start, plugins, lock"] = append(ls.ownTime["CLI start, plugins, lock"], own(start, op.StartedAt))
	ls.ownTime["preflight"] = append(ls.ownTime["preflight"], own(op.StartedAt, svc.StartedAt))
	at := svc.StartedAt
	for _, p := range phaseOrder {
		ls.ownTime[p] = append(ls.ownTime[p], own(at, at.Add(svc.Phases[p].D())))
		at = at.Add(svc.Phases[p].D())
	}
	ls.ownTime["exit"] = append(ls.ownTime["exit"], own(at, end))
	ls.totals = append(ls.totals, total)
	ls.engineWait = append(ls.engineWait, unionLen(spans, start, end))
	ls.overhead = append(ls.overhead, total-unionLen(append(spans, probe), start, end))
	ls.calls = append(ls.calls, len(cs))
	b.deploySwitch = append(b.deploySwitch, svc.Phases["switch"].D())
	logf("   deploy %d/%d: %s (engine wait %s, overhead %s, %d API calls)", i+1, latencyReps, total.Round(time.Millisecond),
		ls.engineWait[i].Round(time.Millisecond), ls.overhead[i].Round(time.Millisecond), len(cs))
	return nil
}

// runBaseline is the `docker run -d` + first 200 baseline, one entry per run.
type runBaseline struct {
	total, wait, over []time.Duration
	calls             []int
	// replace is the same engine work as a replacing deploy done by hand:
	// total, then `docker stop` + `docker rm` of the container the
	// previous run started (the one this run replaces).
	replace []time.Duration
}

// dockerRunBaseline runs the same image 5 times with `docker run -d`
// through the counting proxy until its first 200 from /healthz.
//
// Each run also replaces the previous run's container by hand (`docker
// stop -t 10` + `docker rm`, the old one handles SIGTERM at once), as a
// replacing deploy must: bl.replace is the run's total plus that removal.
// Run -1 is a warm-up whose container the first run replaces.
func (b *bench) dockerRunBaseline(ctx context.Context) (runBaseline, error) {
	var bl runBaseline
	env := []string{"DOCKER_HOST=" + b.proxy.Host(), "DOCKER_CONFIG=" + b.dockerConfig}
	prev := ""
	defer func() {
		if prev != "" {
			_ = b.removeContainer(context.WithoutCancel(ctx), prev)
		}
	}()
	for i := -1; i < 5; i++ {
		addr, err := freeAddr()
		if err != nil {
			return bl, err
		}
		name := fmt.Sprintf("%s-%d", runBaseName, i+1)
		r := run(ctx, env, "docker", "run", "-d", "--name", name, "--label", benchLabel+"=1", "-p", addr+":8080", b.v1)
		if err := r.err("docker run"); err != nil {
			return bl, err
		}
		ready, err := waitHTTP200(ctx, "http://"+addr+"/healthz", "", 20*time.Second)
		if err != nil {
			return bl, err
		}
		old := prev
		prev = name
		if old == "" {
			continue // the warm-up
		}
		cs := b.proxy.Between(r.Start, r.End)
		start, end := r.Start.Round(0), r.End.Round(0)
		w := unionLen(waitSpans(cs), start, end)
		bl.total = append(bl.total, ready.Sub(r.Start))
		bl.wait = append(bl.wait, w)
		bl.over = append(bl.over, end.Sub(start)-w)
		bl.calls = append(bl.calls, len(cs))
		rs := run(ctx, env, "docker", "stop", "-t", "10", old)
		if err := rs.err("docker stop"); err != nil {
			return bl, err
		}
		rr := run(ctx, env, "docker", "rm", old)
		if err := rr.err("docker rm"); err != nil {
			return bl, err
		}
		bl.replace = append(bl.replace, ready.Sub(r.Start)+rr.End.Sub(rs.Start))
	}
	return bl, nil
}

// reportDeployLatency adds the deploy latency rows, notes and extras to s.
func reportDeployLatency(s *section, ls *latencySamples, bl runBaseline, deploySwitch []time.Duration, probePluginStart time.Duration) {
	tot := median(ls.totals)
	s.add("deploy wall time", ms(tot), "ms", "`docker run -d` + first 200", ms(median(bl.total)), "")
	for _, p := range append(append([]string{"CLI start, plugins, lock", "preflight"}, phaseOrder...), "exit (gaps, render, plugin shutdown)") {
		s.add("phase: "+p, ms(median(ls.phases[p])), "ms", "deploy wall time", ms(tot), "")
		if p == "CLI start, plugins, lock" {
			s.add("phase: … of which the wait for the app lock (journaled)", ms(median(ls.phases["lock wait"])), "ms", "deploy wall time", ms(tot), "")
		}
	}
	s.add("engine wait (API requests in flight)", ms(median(ls.engineWait)), "ms", "`docker run`'s engine wait", ms(median(bl.wait)), "")
	s.add("engine overhead: wall − engine wait − probe", ms(median(ls.overhead)), "ms", "`docker run`'s own overhead", ms(median(bl.over)), "")
	for _, p := range append(append([]string{"CLI start, plugins, lock", "preflight"}, phaseOrder...), "exit") {
		s.add("engine overhead within phase: "+p, ms(median(ls.ownTime[p])), "ms", "engine overhead", ms(median(ls.overhead)), "")
	}
	s.add("engine overhead vs its target (< 100 ms)", ms(median(ls.overhead)), "ms", "target", 100, "")
	s.add("deploy wall time vs `docker run -d` + first 200 (bound ≤ 1.5×)", ms(tot)/ms(median(bl.total)), "×", "bound", 1.5, "")
	s.add("deploy wall time vs the same replacement by hand: `docker run -d` + first 200, then `docker stop` + `docker rm` of the old", ms(tot), "ms", "replacement by hand", ms(median(bl.replace)), "")
	s.add("engine API calls per deploy", float64(medianInt(ls.calls)), "calls", "`docker run -d`", float64(medianInt(bl.calls)), "")
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "NOT MET"
	}
	s.note("Deploy wall time ≤ 1.5× `docker run -d` + first 200: %s (%.0f ms against %.0f ms, %.2f×).", verdict(ms(tot) <= 1.5*ms(median(bl.total))), ms(tot), ms(median(bl.total)), ms(tot)/ms(median(bl.total)))
	s.note("A replacing deploy also stops and removes the old container, which `docker run -d` does not: the same replacement done by hand (run, first 200, then stop and rm of the old) takes %.0f ms, and the deploy is %.2f× that.", ms(median(bl.replace)), ms(tot)/ms(median(bl.replace)))
	o := median(ls.overhead)
	s.note("Engine overhead target (< 100 ms): %s (%.0f ms, of which %.0f ms in CLI start, plugins, lock). It includes the edge switch (median %.0f ms: traffic/edge writes the table, asks gordon-edge to reload it and waits for status.json to confirm) and docker CLI and plugin start; the probe plugins start concurrently with the runtime and traffic plugins (a probe/http start alone: %.0f ms).", verdict(o < 100*time.Millisecond), ms(o), ms(median(ls.ownTime["CLI start, plugins, lock"])), ms(median(deploySwitch)), ms(probePluginStart))
	s.extra("deploy_wall_ns", ls.totals)
	s.extra("phases_ns", ls.phases)
	s.extra("engine_wait_ns", ls.engineWait)
	s.extra("overhead_ns", ls.overhead)
	s.extra("overhead_by_phase_ns", ls.ownTime)
	s.extra("api_calls_per_deploy", ls.calls)
	s.extra("api_endpoints_all_deploys", endpointCounts(ls.allCalls))
	s.extra("baseline_docker_run_ready_ns", bl.total)
	s.extra("baseline_docker_run_engine_wait_ns", bl.wait)
	s.extra("baseline_replace_by_hand_ns", bl.replace)
}

// watchMemory starts `docker gordon reconcile --watch`, waits for its
// first pass (no new engine request for 2 s) and reads the VmRSS of its
// process tree.
func (b *bench) watchMemory(ctx context.Context, state string, apps int) (watchRSS, error) {
	env := []string{"DOCKER_CONFIG=" + b.dockerConfig, "GORDON_STATE_DIR=" + state, "DOCKER_HOST=" + b.proxy.Host()}
	t0 := time.Now()
	p, _, err := startProc(fmt.Sprintf("watch-%d", apps), env, filepath.Join(b.tmp, fmt.Sprintf("watch-%d.log", apps)), false, "docker", "gordon", "reconcile", "--watch")
	if err != nil {
		return watchRSS{}, err
	}
	defer p.Stop()
	last := t0
	for time.Since(t0) < 90*time.Second && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		select {
		case <-p.done:
			return watchRSS{}, fmt.Errorf("reconcile --watch exited early (see %s)", filepath.Join(b.tmp, fmt.Sprintf("watch-%d.log", apps)))
		default:
		}
		cs := b.proxy.Between(t0, time.Now())
		for _, c := range cs {
			if !c.Stream && c.End.After(last) {
				last = c.End
			}
		}
		if len(cs) > 0 && time.Since(last) > 2*time.Second {
			break
		}
	}
	w := watchRSS{Apps: apps, FirstPass: last.Sub(t0), CLI: procfs.RSSKiB(p.PID())}
	for _, pid := range descendants(p.PID()) {
		if environOf(pid, "GORDON_PLUGIN") != "" {
			w.Plugins += procfs.RSSKiB(pid)
			w.PluginCount++
		} else if comm(pid) == "docker-gordon" {
			w.Gordon += procfs.RSSKiB(pid)
		}
	}
	logf("   reconcile --watch, %d apps: docker-gordon %.1f MiB, %d plugins %.1f MiB, docker CLI %.1f MiB", apps, mib(w.Gordon), w.PluginCount, mib(w.Plugins), mib(w.CLI))
	return w, nil
}
