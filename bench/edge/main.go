// Command edgebench compares gordon-edge with nginx and with no proxy at
// all: `make bench-edge` builds gordon-edge and runs
//
//	edgebench run -edge bin/gordon-edge [-d 10s] [-c 16] [-rounds 5] [-json FILE]
//
// (`edgebench backend` and `edgebench load -addr A` run the pieces alone;
// `edgebench attack`, see attack.go, measures the HTTP/2 abuse bounds)
// which starts one small Go backend (`edgebench backend`, a child process),
// nginx as a keep-alive reverse proxy with a generated config in a temp dir,
// and gordon-edge with a generated route table, drives each with the same
// closed-loop load generator (16 keep-alive clients, raw HTTP/1.1) and prints
// requests/s, p50, p99 and RSS (VmRSS at idle and peak under load, nginx
// summed over master and workers) with ratios to the direct run.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/gordon-deploy/docker-gordon/bench/internal/proc"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: edgebench backend|run|load|attack [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "backend":
		err = backendMain(os.Args[2:])
	case "run":
		err = runMain(os.Args[2:])
	case "load":
		err = loadMain(os.Args[2:])
	case "tls-backend":
		err = tlsBackendMain(os.Args[2:])
	case "attack":
		err = attackMain(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgebench:", err)
		os.Exit(1)
	}
}

// backendMain serves a 13-byte body on -addr until killed, printing the
// bound address on stdout first. With -n N (N > 1) the one process listens
// N times (-addr must then have port 0) and prints the N addresses on one
// line, comma-separated: N instances of the same backend (as in the
// instance cost in bench/suite).
func backendMain(args []string) error {
	fs := flag.NewFlagSet("backend", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	n := fs.Int("n", 1, "listeners (addresses) served by this one process")
	_ = fs.Parse(args)
	body := []byte("Hello, world\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "13")
		_, _ = w.Write(body)
	})
	var addrs []string
	errc := make(chan error, max(*n, 1))
	for range max(*n, 1) {
		ln, err := net.Listen("tcp", *addr)
		if err != nil {
			return err
		}
		addrs = append(addrs, ln.Addr().String())
		go func() { errc <- http.Serve(ln, h) }()
	}
	fmt.Println(strings.Join(addrs, ","))
	return <-errc
}

// loadMain runs the load generator alone against -addr.
func loadMain(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	addr := fs.String("addr", "", "target host:port")
	host := fs.String("host", "bench.test", "Host header")
	d := fs.Duration("d", 10*time.Second, "duration")
	conns := fs.Int("c", 16, "keep-alive client connections")
	_ = fs.Parse(args)
	res, err := runLoad(*addr, *host, *conns, *d)
	if err != nil {
		return err
	}
	fmt.Printf("%.0f req/s  p50 %s  p99 %s  errors %d\n", res.RPS(), res.P50, res.P99, res.Errors)
	return nil
}

type target struct {
	name string
	addr string
	// pids are sampled for RSS (none for direct: the backend is not a proxy).
	pids func() []int
	res  loadResult
	idle int64 // KiB
	peak int64 // KiB
	// cpu is the CPU time the target's processes used under load (all
	// rounds; for direct, the backend's).
	cpu time.Duration
	// mem is the RSS per idle and per partial-head client connection
	// (proxies only).
	mem *connMemory
}

// cpuPerRequest is the target's CPU time per request (0: not measured).
func (t *target) cpuPerRequest() time.Duration {
	if t.res.Requests == 0 {
		return 0
	}
	return t.cpu / time.Duration(t.res.Requests)
}

func runMain(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	edgeBin := fs.String("edge", "bin/gordon-edge", "gordon-edge binary")
	nginxBin := fs.String("nginx", "nginx", "nginx binary (\"\" or missing: skip nginx)")
	d := fs.Duration("d", 10*time.Second, "load duration per target")
	conns := fs.Int("c", 16, "keep-alive client connections")
	rounds := fs.Int("rounds", 5, "interleaved rounds the load duration is split into")
	memConns := fs.Int("mem-conns", 1000, "client connections per step of the memory-per-connection measure (0: skip it)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file (machine-readable; bench/suite reads it)")
	withHTTPS := fs.Bool("https", true, "also compare HTTPS: direct TLS, nginx (ssl+http2), caddy, gordon-edge --https-addr")
	_ = fs.Parse(args)

	tmp, err := os.MkdirTemp("", "edgebench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var procs procGroup
	defer procs.stopAll()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	targets, backendAddr, err := startTargets(tmp, self, *edgeBin, *nginxBin, procs.start)
	if err != nil {
		return err
	}
	fmt.Printf("edgebench: %d keep-alive clients, %s per target, GOMAXPROCS of this machine %d CPUs\n", *conns, *d, numCPU())
	if err := measureTargets(targets, *conns, *rounds, *d); err != nil {
		return err
	}
	if *memConns > 0 {
		for _, t := range targets[1:] { // proxies only
			if t.name == edgeNoAccessLog {
				continue // the access log does not change memory per connection
			}
			m, err := measureConnMemory(t, "bench.test", *memConns)
			if err != nil {
				return fmt.Errorf("%s memory per connection: %w", t.name, err)
			}
			t.mem = &m
		}
	}
	printTable(os.Stdout, targets)
	var hs []*httpsTarget
	var rss100 int64
	if *withHTTPS {
		hs, rss100, err = runHTTPS(tmp, self, *edgeBin, *nginxBin, backendAddr, *conns, *rounds, *d, procs.start)
		if err != nil {
			return fmt.Errorf("https: %w", err)
		}
		printHTTPS(os.Stdout, hs, rss100)
	}
	if *jsonOut != "" {
		return writeJSON(*jsonOut, targets, *conns, *d, hs, rss100)
	}
	return nil
}

// procGroup starts child processes, each in its own process group, and
// stops them in reverse order (SIGTERM to the group, SIGKILL after 5 s).
type procGroup struct{ cleanups []func() }

// start starts cmd and registers its stop.
func (g *procGroup) start(name string, cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	g.cleanups = append(g.cleanups, func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	return nil
}

// stopAll stops every started process, the last started first.
func (g *procGroup) stopAll() {
	for i := len(g.cleanups) - 1; i >= 0; i-- {
		g.cleanups[i]()
	}
}

// startTargets starts the plain HTTP targets: the backend (direct), nginx
// when nginxBin is found, and gordon-edge with a generated route table;
// it returns them and the backend's address.
func startTargets(tmp, self, edgeBin, nginxBin string, start func(string, *exec.Cmd) error) ([]*target, string, error) {
	// Backend.
	be := exec.Command(self, "backend")
	beOut, err := be.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	be.Stderr = os.Stderr
	if err := start("backend", be); err != nil {
		return nil, "", err
	}
	backendAddr, err := proc.ReadLine(beOut)
	if err != nil {
		return nil, "", fmt.Errorf("backend address: %w", err)
	}
	targets := []*target{{name: "direct", addr: backendAddr, pids: func() []int { return []int{be.Process.Pid} }}}

	// nginx.
	if path, err := exec.LookPath(nginxBin); nginxBin != "" && err == nil {
		addr := freeAddr()
		dir := filepath.Join(tmp, "nginx")
		if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
			return nil, "", err
		}
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, []byte(nginxConf(dir, addr, backendAddr)), 0o644); err != nil {
			return nil, "", err
		}
		cmd := exec.Command(path, "-p", dir, "-c", conf)
		cmd.Stderr = os.Stderr
		if err := start("nginx", cmd); err != nil {
			return nil, "", err
		}
		if err := waitHTTP(addr, "bench.test"); err != nil {
			return nil, "", fmt.Errorf("nginx: %w", err)
		}
		master := cmd.Process.Pid
		targets = append(targets, &target{name: "nginx", addr: addr, pids: func() []int { return append([]int{master}, proc.Children(master)...) }})
	} else {
		fmt.Fprintln(os.Stderr, "edgebench: nginx not found; skipping it")
	}

	// gordon-edge as deployed (its access log on, here to a file), and
	// with the access log off: the access log's cost side by side.
	for _, access := range []string{filepath.Join(tmp, "edge-access.log"), "off"} {
		name, state := "gordon-edge", filepath.Join(tmp, "state")
		if access == "off" {
			name, state = edgeNoAccessLog, filepath.Join(tmp, "state-no-access-log")
		}
		t, err := startEdgeTarget(state, edgeBin, backendAddr, name, access, start)
		if err != nil {
			return nil, "", err
		}
		targets = append(targets, t)
	}

	return targets, backendAddr, nil
}

// edgeNoAccessLog names the gordon-edge target run with --access-log off.
const edgeNoAccessLog = "gordon-edge (access log off)"

// startEdgeTarget starts a gordon-edge named name with a generated route
// table to backendAddr and --access-log access, in state directory state.
func startEdgeTarget(state, edgeBin, backendAddr, name, access string, start func(string, *exec.Cmd) error) (*target, error) {
	addr := freeAddr()
	if err := os.MkdirAll(filepath.Join(state, "edge"), 0o700); err != nil {
		return nil, err
	}
	routes := fmt.Sprintf(`{"schema":1,"generation":1,"http":[{"host":"bench.test","app":"bench","service":"web","backends":[{"addr":%q,"container":"bench"}]}],"tcp":[],"udp":[]}`, backendAddr)
	if err := os.WriteFile(filepath.Join(state, "edge", "routes.json"), []byte(routes), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(edgeBin, "run", "--state-dir", state, "--http-addr", addr, "--log-level", "warn", "--access-log", access)
	cmd.Stderr = os.Stderr
	if err := start(name, cmd); err != nil {
		return nil, err
	}
	if err := waitHTTP(addr, "bench.test"); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pid := cmd.Process.Pid
	return &target{name: name, addr: addr, pids: func() []int { return []int{pid} }}, nil
}

// measureTargets warms every target up (1 s, then its idle RSS) and
// measures them in interleaved rounds (see interleave), filling each
// target's merged result, CPU time and peak RSS.
func measureTargets(targets []*target, conns, rounds int, d time.Duration) error {
	// Warm up every target (connections, pools), then let it settle before
	// its idle RSS.
	for _, t := range targets {
		if _, err := runLoad(t.addr, "bench.test", conns, time.Second); err != nil {
			return fmt.Errorf("%s warm-up: %w", t.name, err)
		}
		time.Sleep(500 * time.Millisecond)
		t.idle = proc.RSSKiB(t.pids()...)
	}
	// Measure in interleaved rounds (each target d/rounds per round, the
	// starting target rotating), so that a burst of load from elsewhere on
	// the machine falls on every target alike instead of on one; each
	// target's figures are over all its rounds.
	per := d / time.Duration(max(rounds, 1))
	runs := make([][]loadResult, len(targets))
	err := interleave(len(targets), rounds, func(i int) error {
		t := targets[i]
		stopPeak := proc.PeakRSS(t.pids, 200*time.Millisecond)
		cpu0 := proc.CPUTime(t.pids()...)
		res, err := runLoad(t.addr, "bench.test", conns, per)
		t.cpu += proc.CPUTime(t.pids()...) - cpu0
		peak := stopPeak()
		if err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		t.peak = max(t.peak, peak)
		runs[i] = append(runs[i], res)
		return nil
	}, func(r int) {
		fmt.Printf("  round %d/%d:", r+1, max(rounds, 1))
		for i, t := range targets {
			fmt.Printf(" %s %.0f req/s", t.name, runs[i][r].RPS())
		}
		fmt.Println()
	})
	for i, t := range targets {
		t.res = mergeResults(runs[i])
	}
	return err
}

// interleave runs each(i) for every target index i in max(rounds, 1)
// rounds, the starting target rotating (round r runs r, r+1, ... mod n),
// so that a burst of load from elsewhere on the machine falls on every
// target alike instead of on one; after(r) ends round r (its progress
// line). The first error stops it.
func interleave(n, rounds int, each func(i int) error, after func(r int)) error {
	for r := range max(rounds, 1) {
		for k := range n {
			if err := each((r + k) % n); err != nil {
				return err
			}
		}
		after(r)
	}
	return nil
}

// jsonTarget is one target in the -json output; durations in nanoseconds
// (Go's time.Duration), RSS in KiB.
type jsonTarget struct {
	Name       string        `json:"name"`
	Requests   int64         `json:"requests"`
	Errors     int64         `json:"errors"`
	ElapsedNS  time.Duration `json:"elapsed_ns"`
	RPS        float64       `json:"rps"`
	P50NS      time.Duration `json:"p50_ns"`
	P99NS      time.Duration `json:"p99_ns"`
	RSSIdleKiB int64         `json:"rss_idle_kib"`
	RSSPeakKiB int64         `json:"rss_load_kib"`
	// CPUPerRequestNS is the target's CPU time (user + system) per request
	// under load (for direct: the backend's).
	CPUPerRequestNS time.Duration `json:"cpu_per_request_ns"`
	// RSS growth per idle keep-alive and per partial-head connection (KiB;
	// absent for direct or when not measured).
	IdleConnKiB        *float64 `json:"idle_conn_kib,omitempty"`
	PartialHeadConnKiB *float64 `json:"partial_head_conn_kib,omitempty"`
}

// writeJSON writes the run's results (the same numbers printTable prints).
func writeJSON(path string, targets []*target, conns int, d time.Duration, hs []*httpsTarget, rss100 int64) error {
	out := struct {
		Clients    int           `json:"clients"`
		DurationNS time.Duration `json:"duration_ns"`
		CPUs       int           `json:"cpus"`
		Targets    []jsonTarget  `json:"targets"`
		HTTPS      []jsonHTTPS   `json:"https,omitempty"`
		// RSS100HostsKiB is gordon-edge's RSS with 100 hosts and certificates.
		RSS100HostsKiB int64 `json:"rss_100_hosts_kib,omitempty"`
	}{Clients: conns, DurationNS: d, CPUs: numCPU(), HTTPS: httpsJSON(hs), RSS100HostsKiB: rss100}
	for _, t := range targets {
		jt := jsonTarget{
			Name: t.name, Requests: t.res.Requests, Errors: t.res.Errors, ElapsedNS: t.res.Elapsed,
			RPS: t.res.RPS(), P50NS: t.res.P50, P99NS: t.res.P99, RSSIdleKiB: t.idle, RSSPeakKiB: t.peak,
			CPUPerRequestNS: t.cpuPerRequest(),
		}
		if t.mem != nil {
			jt.IdleConnKiB, jt.PartialHeadConnKiB = &t.mem.idleKiB, &t.mem.partialKiB
		}
		out.Targets = append(out.Targets, jt)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// printAccessLogCost compares gordon-edge (access log to a file) with
// gordon-edge (access log off) of the same run: throughput and CPU per
// request (the goal: under 5 % of throughput).
func printAccessLogCost(w io.Writer, targets []*target) {
	var on, off *target
	for _, t := range targets {
		switch t.name {
		case "gordon-edge":
			on = t
		case edgeNoAccessLog:
			off = t
		}
	}
	if on == nil || off == nil || off.res.RPS() == 0 {
		return
	}
	cost := 100 * (1 - on.res.RPS()/off.res.RPS())
	fmt.Fprintf(w, "access log cost: %.1f %% of throughput (%.0f req/s with it to a file, %.0f req/s off; goal < 5 %%)", cost, on.res.RPS(), off.res.RPS())
	if a, b := on.cpuPerRequest(), off.cpuPerRequest(); a > 0 && b > 0 {
		fmt.Fprintf(w, ", cpu/req %.1fµs vs %.1fµs", float64(a)/1e3, float64(b)/1e3)
	}
	fmt.Fprintln(w)
}

func printTable(w io.Writer, targets []*target) {
	direct := targets[0].res
	fmt.Fprintf(w, "\n%-28s %10s %7s %9s %7s %9s %7s %8s %10s %10s %8s\n",
		"target", "req/s", "x", "p50", "x", "p99", "x", "errors", "rss idle", "rss load", "cpu/req")
	for _, t := range targets {
		r := t.res
		cpu := "-"
		if d := t.cpuPerRequest(); d > 0 {
			cpu = fmt.Sprintf("%.1fµs", float64(d)/1e3)
		}
		fmt.Fprintf(w, "%-28s %10.0f %7.2f %9s %7.2f %9s %7.2f %8d %9.1fM %9.1fM %8s\n",
			t.name, r.RPS(), r.RPS()/direct.RPS(),
			r.P50.Round(time.Microsecond), float64(r.P50)/float64(direct.P50),
			r.P99.Round(time.Microsecond), float64(r.P99)/float64(direct.P99),
			r.Errors, float64(t.idle)/1024, float64(t.peak)/1024, cpu)
	}
	fmt.Fprintln(w, "(x = ratio to direct; RSS is VmRSS, nginx summed over master and workers; direct RSS and cpu are the backend's;")
	fmt.Fprintln(w, " cpu/req = user+system CPU time of the target's processes per request under load)")
	printAccessLogCost(w, targets)
	for _, t := range targets {
		if t.mem != nil {
			fmt.Fprintf(w, "memory per connection, %-12s idle keep-alive %6.1f KiB   partial head %6.1f KiB\n", t.name+":", t.mem.idleKiB, t.mem.partialKiB)
		}
	}
	var ng, ed *target
	for _, t := range targets {
		switch t.name {
		case "nginx":
			ng = t
		case "gordon-edge":
			ed = t
		}
	}
	if ed != nil {
		verdict := func(ok bool) string {
			if ok {
				return "PASS"
			}
			return "FAIL"
		}
		fmt.Fprintf(w, "target rss idle < 30 MB: %s (%.1f MB)\n", verdict(ed.idle < 30*1024), float64(ed.idle)/1024)
		if ng != nil {
			fmt.Fprintf(w, "target throughput >= nginx: %s (%.2f x nginx)\n", verdict(ed.res.RPS() >= ng.res.RPS()), ed.res.RPS()/ng.res.RPS())
			fmt.Fprintf(w, "target p99 <= nginx: %s (%.2f x nginx)\n", verdict(ed.res.P99 <= ng.res.P99), float64(ed.res.P99)/float64(ng.res.P99))
			if ng.cpuPerRequest() > 0 {
				fmt.Fprintf(w, "(CPU per request: %.2f x nginx)\n", float64(ed.cpuPerRequest())/float64(ng.cpuPerRequest()))
			}
		}
	}
}

func nginxConf(dir, listen, backend string) string {
	return fmt.Sprintf(`daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream backend {
    server %[3]s;
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen %[2]s;
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }
  }
}
`, dir, listen, backend)
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHTTP waits up to 10 s until GET / with host answers 200.
func waitHTTP(addr, host string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return errors.Join(errors.New("not answering 200 within 10s"), last)
}

func numCPU() int { return runtime.NumCPU() }
