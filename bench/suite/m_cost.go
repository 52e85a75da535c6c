package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	procfs "github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"github.com/gordon-deploy/docker-gordon/core"
)

// The cost of replicas and of instances at the edge, each
// measured beside its one-replica figure in the same run.
const (
	replicaReps   = 3               // measured deploys per replica count
	instanceReps  = 2               // load rounds per instance count
	instanceRound = 4 * time.Second // one load round
)

// replicaManifest is manifest() with replicas = n on the service.
func replicaManifest(app, image, host string, n int) string {
	m := manifest(app, image, host)
	return strings.Replace(m, "stop_grace =", fmt.Sprintf("replicas = %d\nstop_grace =", n), 1)
}

// measureReplicas: wall time of deploying a 10-replica app against a
// 1-replica app of the same image, interleaved (1, 10, 1, 10, …) so both
// see the same machine load; each app is first deployed once unmeasured.
func (b *bench) measureReplicas(ctx context.Context, s *section) error {
	state := filepath.Join(b.tmp, "state-replicas")
	edge, _, err := b.startEdge(ctx, state, "edge-replicas")
	if err != nil {
		return err
	}
	defer edge.Stop()
	apps := map[int]string{1: appPrefix + "rep-1", 10: appPrefix + "rep-10"}
	defer b.removeApps(context.WithoutCancel(ctx), apps[1], apps[10])
	for _, app := range apps {
		if err := b.precreateNetworkIn(ctx, app, b.subnets.takeWide()); err != nil {
			return err
		}
	}
	walls := map[int][]time.Duration{}
	phases := map[int]map[string][]time.Duration{1: {}, 10: {}}
	engine := map[int][]time.Duration{}
	for i := -1; i < replicaReps; i++ {
		img := b.v2
		if i%2 != 0 {
			img = b.v1
		}
		for _, n := range []int{1, 10} {
			file := filepath.Join(b.tmp, apps[n]+".toml")
			if err := os.WriteFile(file, []byte(replicaManifest(apps[n], img, apps[n]+".test", n)), 0o644); err != nil {
				return err
			}
			r := b.gordon(ctx, state, false, "deploy", "-q", "-f", file, "--format", "json")
			if err := r.err("deploy " + apps[n]); err != nil {
				return err
			}
			if i >= 0 {
				walls[n] = append(walls[n], r.Elapsed())
				addPhases(phases[n], r.Stdout)
			}
			logf("   deploy %s (%d replicas): %s", apps[n], n, r.Elapsed().Round(time.Millisecond))
			if i < 0 {
				continue
			}
			d, err := b.parallelRuns(ctx, n, img)
			if err != nil {
				return err
			}
			engine[n] = append(engine[n], d)
			logf("   engine baseline: %d × docker run -d in parallel + first 200 from each: %s", n, d.Round(time.Millisecond))
		}
	}
	one, ten := median(walls[1]), median(walls[10])
	s.add("deploy wall time, 10 replicas", ms(ten), "ms", "deploy wall time, 1 replica (same run, interleaved)", ms(one), "")
	s.add("10-replica deploy vs 1-replica deploy vs the issue's bound", ms(ten)/ms(one), "×", "bound", 1.5, "")
	verdict := "PASS"
	if ms(ten) > 1.5*ms(one) {
		verdict = "NOT MET"
	}
	s.note("10 replicas: %s (median %.0f ms against %.0f ms for 1 replica, %.2f×; bound 1.5×; %d deploys each, interleaved, alternating v1/v2 so each replaces every instance).", verdict, ms(ten), ms(one), ms(ten)/ms(one), replicaReps)
	e1, e10 := median(engine[1]), median(engine[10])
	s.add("engine alone: 10 × `docker run -d` in parallel + first 200 from each", ms(e10), "ms", "engine alone: 1 × `docker run -d` + first 200 (same run)", ms(e1), "")
	s.add("10-replica deploy ratio (10 vs 1) against the engine's own ratio", (ms(ten)/ms(one))/(ms(e10)/ms(e1)), "×", "engine's 10-vs-1 ratio", ms(e10)/ms(e1), "")
	s.add("deploy wall time, 10 replicas, against the engine alone starting 10", ms(ten), "ms", "10 × `docker run -d` in parallel + first 200", ms(e10), "")
	s.note("The engine alone, in the same run: starting 10 containers in parallel (`docker run -d`, each until its first 200) takes %.0f ms against %.0f ms for one, %.2f×. A 10-replica deploy cannot beat the engine's own ratio: the 1.5× bound holds only on an engine that starts 10 containers in about the time of one.", ms(e10), ms(e1), ms(e10)/ms(e1))
	s.extra("engine_parallel_run_1_ns", engine[1])
	s.extra("engine_parallel_run_10_ns", engine[10])
	for _, p := range phaseOrder {
		s.add("10 replicas, phase: "+p, ms(median(phases[10][p])), "ms", "1 replica, phase: "+p, ms(median(phases[1][p])), "")
	}
	s.extra("deploy_1_replica_ns", walls[1])
	s.extra("deploy_replica_phases_ns", phases)
	s.extra("deploy_10_replicas_ns", walls[10])
	return nil
}

// removeApps force-removes the containers of apps (bench apps only), so a
// finished measurement leaves no load behind for the next ones.
func (b *bench) removeApps(ctx context.Context, apps ...string) {
	for _, app := range apps {
		if !strings.HasPrefix(app, appPrefix) {
			continue
		}
		r := run(ctx, nil, "docker", "ps", "-aq", "--filter", "label="+gordonApp+"="+app)
		for _, id := range strings.Fields(r.Stdout) {
			if err := b.removeContainer(ctx, id); err != nil {
				logf("   remove %s of %s: %v", id, app, err)
			}
		}
	}
}

// measureInstances: gordon-edge throughput to one route with 3 instances
// (three listeners of one edgebench backend process) against the same route with 1 instance, in
// alternating rounds (1, 3, 1, 3) under the same closed-loop load.
func (b *bench) measureInstances(ctx context.Context, s *section) error {
	// One backend process with three listeners: the rounds differ only in
	// how many instances the edge spreads the load over.
	_, out, err := startProc("instance-backend", nil, "", true, filepath.Join(b.bin, "edgebench"), "backend", "-n", "3")
	if err != nil {
		return err
	}
	line, err := procfs.ReadLine(out)
	if err != nil {
		return fmt.Errorf("backend addresses: %w", err)
	}
	backends := strings.Split(line, ",")
	if len(backends) != 3 {
		return fmt.Errorf("backend addresses: want 3, got %q", line)
	}
	state := filepath.Join(b.tmp, "state-instances")
	if err := os.MkdirAll(filepath.Join(state, "edge"), 0o700); err != nil {
		return err
	}
	routes := filepath.Join(state, "edge", "routes.json")
	statusPath := filepath.Join(state, "edge", "status.json")
	if err := writeInstanceTable(routes, backends[:1], 1); err != nil {
		return err
	}
	edge, addr, err := b.startEdge(ctx, state, "edge-instances")
	if err != nil {
		return err
	}
	defer edge.Stop()
	rps := map[int][]float64{}
	gen := 1
	for round := 0; round < 2*instanceReps; round++ {
		n := 1
		if round%2 == 1 {
			n = 3
		}
		gen++
		if err := writeInstanceTable(routes, backends[:n], gen); err != nil {
			return err
		}
		if _, err := waitGeneration(statusPath, gen); err != nil {
			return err
		}
		l, err := startLoader("http://"+addr+"/", "instances.test", b.clients)
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(instanceRound):
		}
		st := l.Stop()
		if st.Failed > 0 || st.OK == 0 {
			return fmt.Errorf("%d instance(s): %d of %d requests failed: %v", n, st.Failed, st.Requests, st.Errors)
		}
		r := float64(st.OK) / st.Elapsed.Seconds()
		rps[n] = append(rps[n], r)
		logf("   edge, %d instance(s): %.0f req/s", n, r)
	}
	one, three := meanF(rps[1]), meanF(rps[3])
	s.add("edge throughput, one route with 3 instances (round-robin)", three, "req/s", "the same route with 1 instance (same run, alternating rounds)", one, "")
	s.add("edge throughput kept with 3 instances vs the issue's bound", 100*three/one, "%", "bound", 97, "")
	verdict := "PASS"
	if three < 0.97*one {
		verdict = "NOT MET"
	}
	s.note("3 instances: %s (%.0f req/s against %.0f with 1 instance, %.1f %%; bound ≥ 97 %%; %d rounds of %s each, %d keep-alive clients, one edgebench backend process listening on 3 addresses).", verdict, three, one, 100*three/one, instanceReps, instanceRound, b.clients)
	s.extra("edge_rps_1_instance", rps[1])
	s.extra("edge_rps_3_instances", rps[3])
	return nil
}

// writeInstanceTable writes generation gen of a route table routing
// instances.test to backends (one instance each) atomically.
func writeInstanceTable(routes string, backends []string, gen int) error {
	var bs []string
	for i, a := range backends {
		bs = append(bs, fmt.Sprintf(`{"addr":%q,"container":"c%d"}`, a, i))
	}
	body := fmt.Sprintf(`{"schema":1,"generation":%d,"http":[{"host":"instances.test","app":"gbench-instances","service":"web","backends":[%s]}],"tcp":[],"udp":[]}`, gen, strings.Join(bs, ","))
	tmp := routes + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, routes)
}

func meanF(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// addPhases adds the journaled phases of the service step of a deploy's
// --format json output to into (nothing when it does not parse).
func addPhases(into map[string][]time.Duration, out string) {
	var op core.Operation
	if json.Unmarshal([]byte(out), &op) != nil {
		return
	}
	for _, st := range op.Steps {
		if st.Service == "" {
			continue
		}
		for _, p := range phaseOrder {
			into[p] = append(into[p], st.Phases[p].D())
		}
	}
}

// parallelRuns is the engine's own cost of what a deploy of n replicas
// asks of it: n `docker run -d` of image at once (each publishing 8080 on
// a free loopback port), until each answers its first 200 on /healthz.
// Returns the wall time from the first fork to the last 200; the
// containers are removed afterwards (not timed). Errors name the run.
func (b *bench) parallelRuns(ctx context.Context, n int, image string) (time.Duration, error) {
	addrs := make([]string, n)
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return 0, err
		}
		addrs[i] = a
	}
	names := make([]string, n)
	errs := make([]error, n)
	readyAt := make([]time.Time, n)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		names[i] = fmt.Sprintf("%s-par%d-%d", runBaseName, n, i)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			r := run(ctx, nil, "docker", "run", "-d", "--name", names[i], "--label", benchLabel+"=1", "-p", addrs[i]+":8080", image)
			if errs[i] = r.err("docker run " + names[i]); errs[i] != nil {
				return
			}
			readyAt[i], errs[i] = waitHTTP200(ctx, "http://"+addrs[i]+"/healthz", "", 30*time.Second)
		}(i)
	}
	wg.Wait()
	var last time.Time
	for i := range n {
		if readyAt[i].After(last) {
			last = readyAt[i]
		}
	}
	for _, name := range names {
		if err := b.removeContainer(context.WithoutCancel(ctx), name); err != nil && !strings.Contains(err.Error(), "No such container") {
			logf("   remove %s: %v", name, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return last.Sub(start), nil
}
