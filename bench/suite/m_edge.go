package main

import (
	"context"
	"encoding/json"
	"fmt"
	procfs "github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"github.com/gordon-deploy/docker-gordon/core/routetable"
	trafficedge "github.com/gordon-deploy/docker-gordon/plugins/traffic/edge"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// edgebenchJSON is bench/edge's -json output.
type edgebenchJSON struct {
	Clients    int           `json:"clients"`
	DurationNS time.Duration `json:"duration_ns"`
	Targets    []struct {
		Name       string        `json:"name"`
		Requests   int64         `json:"requests"`
		Errors     int64         `json:"errors"`
		RPS        float64       `json:"rps"`
		P50NS      time.Duration `json:"p50_ns"`
		P99NS      time.Duration `json:"p99_ns"`
		RSSIdleKiB int64         `json:"rss_idle_kib"`
		RSSPeakKiB int64         `json:"rss_load_kib"`
	} `json:"targets"`
	// HTTPS is edgebench's HTTPS comparison (same certificate everywhere).
	HTTPS []struct {
		Name         string        `json:"name"`
		KeepAliveRPS float64       `json:"keepalive_rps"`
		KeepAliveP99 time.Duration `json:"keepalive_p99_ns"`
		NewConnsRPS  float64       `json:"new_conns_rps"`
		H2RPS        float64       `json:"h2_rps"`
		Errors       int64         `json:"errors"`
	} `json:"https"`
	RSS100HostsKiB int64 `json:"rss_100_hosts_kib"`
}

// measureEdge runs `edgebench run` (the `make bench-edge` measurement).
func (b *bench) measureEdge(ctx context.Context, s *section) error {
	s.Method = fmt.Sprintf("`make bench-edge` in the same run: `edgebench run` drives a small Go backend directly, through nginx (keep-alive upstream, 2 workers) and through gordon-edge with %d keep-alive clients, %s per target after a 1 s warm-up; then HTTPS with one ECDSA P-256 certificate for every proxy (TLS 1.3): the backend serving TLS itself, nginx (ssl + http2), Caddy (tls with files) and gordon-edge --https-addr, keep-alive throughput and p99, new TLS connections per second (one request each), HTTP/2 with h2load (4 connections × 16 streams), and gordon-edge's RSS with 100 hosts and certificates. Route switch: a separate gordon-edge with two backends; the route table is rewritten atomically (temp + rename, as traffic/edge does) 20 times and the time until edge/status.json reports the new generation is measured (polled every 1 ms).", b.clients, b.edgeDur)
	s.Baseline = "direct (no proxy) for throughput and latency; the edge's route-table poll interval (150 ms, edgeproxy's documented default) for the route switch, measured both on the poll alone and as deploys do it (traffic/edge writes the table and asks the edge to reload at once)."
	jsonPath := filepath.Join(b.tmp, "edgebench.json")
	path := os.Getenv("PATH") + ":/usr/sbin"
	nginx := "nginx"
	if _, err := exec.LookPath("nginx"); err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
			nginx = "/usr/sbin/nginx"
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(b.bin, "edgebench"), "run", "-edge", filepath.Join(b.bin, "gordon-edge"), "-nginx", nginx,
		"-d", b.edgeDur.String(), "-c", fmt.Sprint(b.clients), "-json", jsonPath)
	cmd.Env = append(os.Environ(), "PATH="+path)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("edgebench: %w", err)
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		return err
	}
	var eb edgebenchJSON
	if err := json.Unmarshal(raw, &eb); err != nil {
		return err
	}
	s.extra("edgebench", eb)
	if len(eb.Targets) == 0 || eb.Targets[0].Name != "direct" {
		return fmt.Errorf("edgebench: no direct target")
	}
	d := eb.Targets[0]
	b.ebDirectIdle, b.ebDirectLoad = d.RSSIdleKiB, d.RSSPeakKiB
	s.add("direct: throughput", d.RPS, "req/s", "direct", d.RPS, "")
	hasNginx := false
	for _, t := range eb.Targets[1:] {
		hasNginx = hasNginx || t.Name == "nginx"
		s.add(t.Name+": throughput", t.RPS, "req/s", "direct", d.RPS, "")
		s.add(t.Name+": p50 latency", ms(t.P50NS), "ms", "direct", ms(d.P50NS), "")
		s.add(t.Name+": p99 latency", ms(t.P99NS), "ms", "direct", ms(d.P99NS), "")
		if t.Errors > 0 {
			s.note("%s: %d failed requests during the edgebench run", t.Name, t.Errors)
		}
		if t.Name == "gordon-edge" {
			b.ebEdgeIdle, b.ebEdgeLoad = t.RSSIdleKiB, t.RSSPeakKiB
		}
	}
	if !hasNginx {
		s.note("nginx was not found, so it was skipped (`make bench` installs Debian's nginx-light with apt-get when it can)")
	}
	b.edgeHTTPS(s, eb)
	noteAccessLogCost(s, eb)
	for _, t := range eb.Targets {
		if t.Name == "gordon-edge" {
			for _, n := range eb.Targets {
				if n.Name == "nginx" {
					s.note("gordon-edge vs nginx in this run: %.2f× throughput, %.2f× p99", t.RPS/n.RPS, float64(t.P99NS)/float64(n.P99NS))
				}
			}
		}
	}
	return nil
}

// noteAccessLogCost adds the access log's cost: gordon-edge (its access
// log to a file, as deployed) against gordon-edge with --access-log off in
// the same run (goal: under 5 % of throughput).
func noteAccessLogCost(s *section, eb edgebenchJSON) {
	var on, off float64
	for _, t := range eb.Targets {
		switch t.Name {
		case "gordon-edge":
			on = t.RPS
		case "gordon-edge (access log off)":
			off = t.RPS
		}
	}
	if on > 0 && off > 0 {
		s.add("gordon-edge: access log cost (throughput lost)", 100*(1-on/off), "%", "target (5 %)", 5, "")
	}
}

// measureRouteSwitch times route table write → applied generation.
func (b *bench) measureRouteSwitch(ctx context.Context, s *section) error {
	backends, err := b.switchBackends()
	if err != nil {
		return err
	}
	state := filepath.Join(b.tmp, "state-switch")
	if err := os.MkdirAll(filepath.Join(state, "edge"), 0o700); err != nil {
		return err
	}
	routes := filepath.Join(state, "edge", "routes.json")
	write := func(gen int) error { return writeSwitchTable(routes, backends, gen) }
	if err := write(1); err != nil {
		return err
	}
	edge, _, err := b.startEdge(ctx, state, "edge-switch")
	if err != nil {
		return err
	}
	defer edge.Stop()
	statusPath := filepath.Join(state, "edge", "status.json")
	if _, err := waitGeneration(statusPath, 1); err != nil {
		return err
	}
	var ds []time.Duration
	for gen := 2; gen <= 21; gen++ {
		// Start at a random phase of the edge's poll cycle.
		time.Sleep(time.Duration(37*gen%97) * time.Millisecond)
		t0 := time.Now()
		if err := write(gen); err != nil {
			return err
		}
		if _, err := waitGeneration(statusPath, gen); err != nil {
			return err
		}
		ds = append(ds, time.Since(t0))
	}
	poll := 150.0
	s.add("route switch without reload (edge's poll only): table write → applied generation, median of 20", ms(median(ds)), "ms", "edge poll interval", poll, "")
	s.add("route switch without reload: slowest of 20", ms(percentile(ds, 100)), "ms", "edge poll interval", poll, "")
	s.extra("route_switch_ns", ds)
	return measureApplySwitch(ctx, s, state, backends, poll)
}

// switchBackends starts the two edgebench backends the route switch
// alternates between and returns their addresses.
func (b *bench) switchBackends() ([]string, error) {
	var backends []string
	for i := range 2 {
		_, out, err := startProc(fmt.Sprintf("switch-backend-%d", i), nil, "", true, filepath.Join(b.bin, "edgebench"), "backend")
		if err != nil {
			return nil, err
		}
		addr, err := procfs.ReadLine(out)
		if err != nil {
			return nil, fmt.Errorf("backend address: %w", err)
		}
		backends = append(backends, addr)
	}
	return backends, nil
}

// writeSwitchTable writes generation gen of the route table (switch.test
// to backends[gen%2]) to routes atomically (temp file, fsync, rename).
func writeSwitchTable(routes string, backends []string, gen int) error {
	body := fmt.Sprintf(`{"schema":1,"generation":%d,"http":[{"host":"switch.test","app":"gbench-switch","service":"web","backends":[{"addr":%q,"container":"c%d"}]}],"tcp":[],"udp":[]}`, gen, backends[gen%2], gen%2)
	tmp := routes + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(body); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	return os.Rename(tmp, routes)
}

// appliedGeneration is the applied_generation of the edge's status.json
// (0 when unreadable).
func appliedGeneration(statusPath string) int {
	raw, err := os.ReadFile(statusPath)
	if err != nil {
		return 0
	}
	var st struct {
		Applied int `json:"applied_generation"`
	}
	_ = json.Unmarshal(raw, &st)
	return st.Applied
}

// waitGeneration polls status.json every millisecond until the edge
// applied gen (5 s bound) and returns how long that took.
func waitGeneration(statusPath string, gen int) (time.Duration, error) {
	t0 := time.Now()
	for time.Since(t0) < 5*time.Second {
		if appliedGeneration(statusPath) >= gen {
			return time.Since(t0), nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, fmt.Errorf("generation %d not applied within 5 s (status: %s)", gen, readShort(statusPath))
}

// measureApplySwitch is what a deploy does: traffic/edge's Apply writes
// the table, pokes the edge (POST /reload) and waits for status.json to
// confirm; 20 switches between backends.
func measureApplySwitch(ctx context.Context, s *section, state string, backends []string, poll float64) error {
	tr := trafficedge.New(state, trafficedge.WithApplyTimeout(5*time.Second))
	var applies []time.Duration
	for i := range 20 {
		time.Sleep(time.Duration(37*i%97) * time.Millisecond)
		graph := routetable.Graph{HTTP: []routetable.HTTPRoute{{Host: "switch.test", App: "gbench-switch", Service: "web",
			Backends: []routetable.Backend{{Addr: backends[i%2], Container: fmt.Sprintf("c%d", i%2)}}}}}
		t0 := time.Now()
		if _, err := tr.Apply(ctx, graph); err != nil {
			return err
		}
		applies = append(applies, time.Since(t0))
	}
	s.add("route switch as a deploy does it (traffic/edge Apply: write, POST /reload, confirmed), median of 20", ms(median(applies)), "ms", "edge poll interval", poll, "")
	s.add("route switch as a deploy does it: slowest of 20", ms(percentile(applies, 100)), "ms", "edge poll interval", poll, "")
	s.extra("route_switch_apply_ns", applies)
	return nil
}

func readShort(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(tail(string(b), 300))
}

// edgeHTTPS adds the HTTPS rows: keep-alive, new TLS connections and
// HTTP/2 throughput of every target against nginx (the targets' baseline),
// p99, and gordon-edge's RSS with 100 hosts and certificates.
func (b *bench) edgeHTTPS(s *section, eb edgebenchJSON) {
	if len(eb.HTTPS) == 0 {
		return
	}
	base := eb.HTTPS[0] // direct
	for _, t := range eb.HTTPS {
		if t.Name == "nginx" {
			base = t
		}
	}
	for _, t := range eb.HTTPS {
		s.add("https "+t.Name+": keep-alive throughput", t.KeepAliveRPS, "req/s", base.Name, base.KeepAliveRPS, "")
		s.add("https "+t.Name+": keep-alive p99", ms(t.KeepAliveP99), "ms", base.Name, ms(base.KeepAliveP99), "")
		s.add("https "+t.Name+": new TLS connections", t.NewConnsRPS, "conn/s", base.Name, base.NewConnsRPS, "")
		if t.H2RPS > 0 && base.H2RPS > 0 {
			s.add("https "+t.Name+": HTTP/2 throughput (16 streams)", t.H2RPS, "req/s", base.Name, base.H2RPS, "")
		}
		if t.Errors > 0 {
			s.note("https %s: %d failed requests during the edgebench run", t.Name, t.Errors)
		}
	}
	if eb.RSS100HostsKiB > 0 {
		s.add("gordon-edge: RSS with 100 hosts and certificates", float64(eb.RSS100HostsKiB)/1024, "MiB", "target (40 MiB)", 40, "")
	}
}
