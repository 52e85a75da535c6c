package main

import (
	"context"
	"fmt"
	procfs "github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"path/filepath"
	"time"
)

// settle is the pause after each deploy/replacement, so every deploy
// starts from a steady state with the clients hitting the current
// generation.
const settle = time.Second

// measureDeployUnderLoad: measurement 1.
func (b *bench) measureDeployUnderLoad(ctx context.Context, s *section) error {
	s.Method = fmt.Sprintf("%d keep-alive HTTP/1.1 clients in a closed loop (GET /, a failing client retries after 10 ms) while the app's only service is replaced %d times, alternating images gordon-test/httpd:v1 and :v2 (FROM scratch). docker gordon: `docker gordon deploy -f app.toml` through a foreground gordon-edge (overlap deploy: start, probe, switch, drain, retire). Naive: one container publishing 127.0.0.1:PORT→8080, replaced the way `docker compose up -d` does after an image change (compose v2: create the new container under a temporary name, stop the old one, remove it, rename, start the new one; compose does not wait for readiness); done through the engine API, so no CLI start-up widens the gap. A %s pause follows each replacement in both runs. A failure is a transport error or a non-2xx answer; the longest gap is the longest interval in which no client got a successful answer.", b.clients, b.deploys, settle)
	s.Baseline = "the naive replacement, measured in the same run."

	g, err := b.loadGordon(ctx, s)
	if err != nil {
		return fmt.Errorf("docker gordon: %w", err)
	}
	n, err := b.loadNaive(ctx)
	if err != nil {
		return fmt.Errorf("naive: %w", err)
	}
	s.add("failed requests: docker gordon", float64(g.Failed), "requests", "naive", float64(n.Failed), "")
	s.add("requests: docker gordon", float64(g.Requests), "requests", "naive", float64(n.Requests), fmt.Sprintf("totals over %.0f s vs %.0f s of load: compare the rate below", g.Elapsed.Seconds(), n.Elapsed.Seconds()))
	perSec := func(st loadStats) float64 { return float64(st.Requests) / max(st.Elapsed.Seconds(), 1e-9) }
	s.add("requests per second during the deploys: docker gordon", perSec(g), "req/s", "naive", perSec(n), "")
	rate := func(st loadStats) float64 { return 100 * float64(st.Failed) / float64(max(st.Requests, 1)) }
	s.add("failed share of requests: docker gordon", rate(g), "%", "naive", rate(n), "")
	s.add("longest gap without a successful response: docker gordon", ms(g.MaxGap), "ms", "naive", ms(n.MaxGap), "")
	s.add("p99 request latency: docker gordon (through the edge)", ms(g.P99), "ms", "naive (direct to the container)", ms(n.P99), "")
	if len(b.loadWalls) > 0 && len(b.naiveWalls) > 0 {
		s.add("time per replacement under load: `docker gordon deploy`", ms(median(b.loadWalls)), "ms", "naive replacement (API calls only)", ms(median(b.naiveWalls)), "")
	}
	s.extra("gordon", g)
	s.extra("naive", n)
	if g.Failed == 0 && n.Failed > 0 {
		s.note("PASS: 0 failed requests for docker gordon, %d for the naive replacement (%.1f %% of its requests).", n.Failed, 100*float64(n.Failed)/float64(max(n.Requests, 1)))
	} else {
		s.note("FAIL: acceptance wants 0 failures for docker gordon and a non-zero count for the naive replacement (got %d and %d). First errors: gordon %v; naive %v", g.Failed, n.Failed, g.Errors, n.Errors)
	}
	return nil
}

func (b *bench) loadGordon(ctx context.Context, s *section) (loadStats, error) {
	app := appPrefix + "load"
	state := filepath.Join(b.tmp, "state-load")
	edge, addr, err := b.startEdge(ctx, state, "edge-load")
	if err != nil {
		return loadStats{}, err
	}
	defer edge.Stop()
	if err := b.precreateNetwork(ctx, app); err != nil {
		return loadStats{}, err
	}
	if _, err := b.deployApp(ctx, state, app, b.v1, false); err != nil {
		return loadStats{}, err
	}
	url, host := "http://"+addr+"/", app+".test"
	if _, err := waitHTTP200(ctx, url, host, 10*time.Second); err != nil {
		return loadStats{}, err
	}
	time.Sleep(time.Second)
	b.edgeIdleKiB = procfs.RSSKiB(edge.PID())

	stopPeak := procfs.PeakRSS(func() []int { return []int{edge.PID()} }, 200*time.Millisecond)
	l, err := startLoader(url, host, b.clients)
	if err != nil {
		return loadStats{}, err
	}
	var walls []time.Duration
	var derr error
	for i := range b.deploys {
		img := b.v2
		if i%2 == 1 {
			img = b.v1
		}
		r, err := b.deployApp(ctx, state, app, img, false)
		if err != nil {
			derr = err
			break
		}
		walls = append(walls, r.Elapsed())
		logf("   docker gordon deploy %d/%d: %s", i+1, b.deploys, r.Elapsed().Round(time.Millisecond))
		time.Sleep(settle)
	}
	st := l.Stop()
	b.edgeLoadKiB = stopPeak()
	if derr != nil {
		return st, derr
	}
	logf("   docker gordon: %d requests, %d failed, longest gap %s", st.Requests, st.Failed, st.MaxGap.Round(time.Millisecond))
	b.loadWalls = walls
	s.extra("gordon_deploy_wall_ns", walls)
	return st, nil
}

func (b *bench) loadNaive(ctx context.Context) (loadStats, error) {
	addr, err := freeAddr()
	if err != nil {
		return loadStats{}, err
	}
	var port int
	fmt.Sscanf(addr[len("127.0.0.1:"):], "%d", &port)
	id, err := b.naiveCreate(ctx, naiveName, b.v1, port)
	if err != nil {
		return loadStats{}, err
	}
	if err := b.startContainer(ctx, id); err != nil {
		return loadStats{}, err
	}
	url := "http://" + addr + "/"
	if _, err := waitHTTP200(ctx, url, "", 10*time.Second); err != nil {
		return loadStats{}, err
	}
	time.Sleep(time.Second)
	l, err := startLoader(url, "naive.test", b.clients)
	if err != nil {
		return loadStats{}, err
	}
	var derr error
	for i := range b.deploys {
		img := b.v2
		if i%2 == 1 {
			img = b.v1
		}
		t0 := time.Now()
		id, err = b.naiveReplace(ctx, id, img, port, i)
		if err != nil {
			derr = err
			break
		}
		b.naiveWalls = append(b.naiveWalls, time.Since(t0))
		logf("   naive replacement %d/%d: %s", i+1, b.deploys, time.Since(t0).Round(time.Millisecond))
		time.Sleep(settle)
	}
	st := l.Stop()
	if derr != nil {
		return st, derr
	}
	logf("   naive: %d requests, %d failed, longest gap %s", st.Requests, st.Failed, st.MaxGap.Round(time.Millisecond))
	return st, nil
}
