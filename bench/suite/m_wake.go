package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

const wakeReps = 10

// measureWake: scale to zero's wake latency (SPEC R81) against its floor,
// `docker start` of a stopped container of the same image plus its first
// 200, in the same run.
func (b *bench) measureWake(ctx context.Context, s *section) error {
	s.Method = fmt.Sprintf("Wake: a one-service app (gordon-test/httpd, HTTP readiness on /healthz) with sleep_after, put to sleep with `docker gordon sleep`, then one GET through the edge, timed from the request to its 200 (the edge holds it, the watcher `docker gordon reconcile --watch` starts the container, probes it and routes it); median of %d. Baseline: a plain container of the same image (`docker run`, then `docker stop`), timed from `docker start` to the first 200 from its address, polled every 5 ms; median of %d, in the same run.", wakeReps, wakeReps)
	s.Baseline = "`docker start` + first 200 of a stopped container of the same image"
	state := filepath.Join(b.tmp, "state-wake")
	edge, addr, err := b.startEdge(ctx, state, "edge-wake")
	if err != nil {
		return err
	}
	defer edge.Stop()
	app := appPrefix + "wake"
	file := filepath.Join(b.tmp, app+".toml")
	m := strings.Replace(manifest(app, b.v1, app+".test"), "stop_grace = \"10s\"", "stop_grace = \"10s\"\nsleep_after = \"1h\"", 1)
	if err := os.WriteFile(file, []byte(m), 0o644); err != nil {
		return err
	}
	if r := b.gordon(ctx, state, false, "deploy", "-f", file); r.err("deploy "+app) != nil {
		return r.err("deploy " + app)
	}
	defer b.removeApps(context.WithoutCancel(ctx), app)
	env := []string{"DOCKER_CONFIG=" + b.dockerConfig, "GORDON_STATE_DIR=" + state}
	watch, _, err := startProc("watch-wake", env, filepath.Join(b.tmp, "watch-wake.log"), false, "docker", "gordon", "reconcile", "--watch", "--interval", "1h")
	if err != nil {
		return err
	}
	defer watch.Stop()
	c := &http.Client{Timeout: 70 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	get := func(url, host string) (int, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Host = host
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	var wakes []time.Duration
	for i := range wakeReps {
		if r := b.gordon(ctx, state, false, "sleep", app); r.err("sleep") != nil {
			return r.err("sleep")
		}
		t0 := time.Now()
		code, err := get("http://"+addr+"/", app+".test")
		if err != nil || code != 200 {
			return fmt.Errorf("wake %d: %d %v", i, code, err)
		}
		wakes = append(wakes, time.Since(t0))
	}
	base, err := b.startBaseline(ctx, get)
	if err != nil {
		return err
	}
	mw, mb := median(wakes), median(base)
	s.add("first request to a sleeping service answered (wake)", ms(mw), "ms", s.Baseline, ms(mb), fmt.Sprintf("ours: %.0f ms over the floor (goal: at most 100)", ms(mw-mb)))
	if sp := b.wakeStartProbe(ctx, state, app); len(sp) > 0 {
		msp := median(sp)
		s.add("of which the wake's container start and probe (its op's start_probe phase)", ms(msp), "ms", s.Baseline, ms(mb), fmt.Sprintf("the rest of the wake: %.0f ms (edge, watcher, lock, journal, routes)", ms(mw-msp)))
		s.extra("wake_start_probe_ns", sp)
	}
	s.extra("wake_ns", wakes)
	s.extra("docker_start_first_200_ns", base)
	return nil
}

// startBaseline times `docker start` + the first 200 of a plain stopped
// container of the bench image, wakeReps times.
func (b *bench) startBaseline(ctx context.Context, get func(url, host string) (int, error)) ([]time.Duration, error) {
	name := appPrefix + "wake-base"
	_ = run(ctx, nil, "docker", "rm", "-f", name)
	defer run(context.WithoutCancel(ctx), nil, "docker", "rm", "-f", name)
	if r := run(ctx, nil, "docker", "run", "-d", "--name", name, "--label", benchLabel+"=1", b.v1); r.err("docker run") != nil {
		return nil, r.err("docker run")
	}
	var out []time.Duration
	for i := range wakeReps {
		if r := run(ctx, nil, "docker", "stop", "-t", "10", name); r.err("docker stop") != nil {
			return nil, r.err("docker stop")
		}
		t0 := time.Now()
		if r := run(ctx, nil, "docker", "start", name); r.err("docker start") != nil {
			return nil, r.err("docker start")
		}
		ip := strings.TrimSpace(run(ctx, nil, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name).Stdout)
		for {
			if code, err := get("http://"+ip+":8080/healthz", ""); err == nil && code == 200 {
				break
			}
			if time.Since(t0) > time.Minute || ctx.Err() != nil {
				return nil, fmt.Errorf("baseline %d: no 200 from %s within a minute", i, ip)
			}
			time.Sleep(5 * time.Millisecond)
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}

// wakeStartProbe is the start_probe phase of each journaled wake of app:
// the part of a wake that starts the container and probes it.
func (b *bench) wakeStartProbe(ctx context.Context, state, app string) []time.Duration {
	r := b.gordon(ctx, state, false, "ops", app, "--format", "json")
	var ops []struct {
		Kind  string `json:"kind"`
		Steps []struct {
			PhasesMS map[string]int64 `json:"phases_ms"`
		} `json:"steps"`
	}
	if r.err("ops") != nil || json.Unmarshal([]byte(r.Stdout), &ops) != nil {
		return nil
	}
	var out []time.Duration
	for _, op := range ops {
		if op.Kind != "wake" {
			continue
		}
		for _, st := range op.Steps {
			if v, ok := st.PhasesMS["start_probe"]; ok {
				out = append(out, time.Duration(v)*time.Millisecond)
			}
		}
	}
	return out
}
