package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// `edgebench attack` (make bench-abuse): the HTTP/2 abuse bounds of
// gordon-edge beside nginx. Both serve the same ECDSA
// certificate for bench.test (nginx: ssl + http2, http2_max_concurrent_
// streams 128, the HTTPS comparison's config) in front of one in-process
// Go backend; each attack of attack_h2.go runs against each target in
// turn while a normal client (net/http over h2, its own connection)
// makes GET / back to back: its success rate and median latency during
// the attack are compared with its median just before.

// backendSlow is how long the backend holds a request for /slow.
const backendSlow = 2 * time.Second

// attackBackend is the in-process backend: / (13 bytes), /slow (after
// backendSlow), /big (1 MiB); it counts open connections, /slow requests
// in flight and requests carrying the header flood.
type attackBackend struct {
	addr         string
	open         atomic.Int64
	slowInFlight atomic.Int64
	bigInFlight  atomic.Int64 // /big answers not yet written out
	flooded      atomic.Int64
	srv          *http.Server
}

func startAttackBackend() (*attackBackend, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	be := &attackBackend{addr: ln.Addr().String()}
	body, big := []byte("Hello, world\n"), make([]byte, 1<<20)
	be.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Flood-0") != "" {
				be.flooded.Add(1)
			}
			switch r.URL.Path {
			case "/slow":
				be.slowInFlight.Add(1)
				select {
				case <-time.After(backendSlow):
				case <-r.Context().Done():
				}
				be.slowInFlight.Add(-1)
			case "/big":
				be.bigInFlight.Add(1)
				defer be.bigInFlight.Add(-1)
				w.Header().Set("Content-Length", fmt.Sprint(len(big)))
				_, _ = w.Write(big)
				if f, ok := w.(http.Flusher); ok {
					f.Flush()
				}
				return
			}
			w.Header().Set("Content-Length", "13")
			_, _ = w.Write(body)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				be.open.Add(1)
			case http.StateClosed, http.StateHijacked:
				be.open.Add(-1)
			}
		},
		// A small send buffer: a /big answer the proxy does not read
		// stays in its handler (bigInFlight) instead of in the kernel.
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetWriteBuffer(64 << 10)
			}
			return ctx
		},
		MaxHeaderBytes: 1 << 20,
	}
	go func() { _ = be.srv.Serve(ln) }()
	return be, nil
}

// sample reads v every 50 ms until end and returns the largest value.
func (be *attackBackend) sample(v *atomic.Int64, end time.Time) int64 {
	peak := v.Load()
	for time.Now().Before(end) {
		time.Sleep(50 * time.Millisecond)
		peak = max(peak, v.Load())
	}
	return peak
}

// normalRun is what the normal client saw.
type normalRun struct {
	ok, total int
	lat       []time.Duration // of the successful requests
}

func (n normalRun) median() time.Duration {
	if len(n.lat) == 0 {
		return 0
	}
	s := slices.Clone(n.lat)
	slices.Sort(s)
	return s[len(s)/2]
}

func (n normalRun) successPct() float64 {
	if n.total == 0 {
		return 0
	}
	return 100 * float64(n.ok) / float64(n.total)
}

// normalClient makes GET / on addr over its own h2 connection back to
// back until stop is closed (each request bounded to 5 s, at most
// 100,000); its first request (the TLS handshake) is not counted, ready
// (when not nil) is closed after it.
func normalClient(addr string, stop <-chan struct{}, ready chan<- struct{}) normalRun {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{ServerName: "bench.test", InsecureSkipVerify: true},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var run normalRun
	if resp, err := cl.Get("https://bench.test/"); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if ready != nil {
		close(ready)
	}
	for i := 0; i < 100000; i++ {
		select {
		case <-stop:
			return run
		default:
		}
		start := time.Now()
		resp, err := cl.Get("https://bench.test/")
		run.total++
		if err != nil {
			continue
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK && resp.ProtoMajor == 2 {
			run.ok++
			run.lat = append(run.lat, time.Since(start))
		}
	}
	return run
}

// normalFor runs the normal client for d.
func normalFor(addr string, d time.Duration) normalRun {
	stop := make(chan struct{})
	time.AfterFunc(d, func() { close(stop) })
	return normalClient(addr, stop, nil)
}

// normalMin is the least time the normal client runs alongside an attack.
const normalMin = time.Second

// attackResult is one attack on one target (the table's row; -json).
type attackResult struct {
	Attack string `json:"attack"`
	Target string `json:"target"`
	attackFigures
	Error            string        `json:"error,omitempty"`
	NormalRequests   int           `json:"normal_requests"`
	NormalSuccessPct float64       `json:"normal_success_pct"`
	QuietMedianNS    time.Duration `json:"quiet_median_ns"`
	DuringMedianNS   time.Duration `json:"during_median_ns"`
	Ratio            float64       `json:"ratio"`
}

// runAttack measures the quiet median, then runs attack a against t with
// the normal client alongside.
func runAttack(name string, a attackFunc, t *httpsTarget, be *attackBackend, d time.Duration) attackResult {
	r := attackResult{Attack: name, Target: t.name}
	r.QuietMedianNS = normalFor(t.addr, 1500*time.Millisecond).median()
	stop, ready := make(chan struct{}), make(chan struct{})
	during := make(chan normalRun, 1)
	go func() { during <- normalClient(t.addr, stop, ready) }()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
	}
	// The normal client runs for the attack and at least normalMin (an
	// attack the target cuts short still leaves work behind).
	start := time.Now()
	figs, err := a(t, be, min(d, attackMax))
	time.Sleep(normalMin - time.Since(start))
	close(stop)
	n := <-during
	r.attackFigures = figs
	if err != nil {
		r.Error = err.Error()
	}
	r.NormalRequests, r.NormalSuccessPct, r.DuringMedianNS = n.total, n.successPct(), n.median()
	if r.QuietMedianNS > 0 {
		r.Ratio = float64(r.DuringMedianNS) / float64(r.QuietMedianNS)
	}
	return r
}

func attackMain(args []string) error {
	fs := flag.NewFlagSet("attack", flag.ExitOnError)
	edgeBin := fs.String("edge", "bin/gordon-edge", "gordon-edge binary")
	nginxBin := fs.String("nginx", "nginx", "nginx binary (\"\" or missing: skip nginx)")
	d := fs.Duration("d", 5*time.Second, "time bound of each attack (at most 10s)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	only := fs.String("only", "", "run only the attacks whose name contains this")
	_ = fs.Parse(args)

	tmp, err := os.MkdirTemp("", "edgebench-attack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// nginx's workers (another user when run as root) write the bodies
	// they buffer under tmp.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	var procs procGroup
	defer procs.stopAll()
	certFile, keyFile, err := benchCert(filepath.Join(tmp, "tls"), "bench.test")
	if err != nil {
		return err
	}
	// Each target has a backend of its own (its connection counts are
	// not the other target's pooled connections).
	var backends []*attackBackend
	defer func() {
		for _, be := range backends {
			be.srv.Close()
		}
	}()
	newBackend := func() (string, error) {
		be, err := startAttackBackend()
		if err != nil {
			return "", err
		}
		backends = append(backends, be)
		return be.addr, nil
	}
	addr, err := newBackend()
	if err != nil {
		return err
	}
	edge, err := startEdgeTLS(tmp, *edgeBin, addr, certFile, keyFile, procs.start)
	if err != nil {
		return err
	}
	targets := []*httpsTarget{edge}
	if path, err := exec.LookPath(*nginxBin); *nginxBin != "" && err == nil {
		if addr, err = newBackend(); err != nil {
			return err
		}
		ng, err := startNginxTLS(tmp, path, addr, certFile, keyFile, procs.start)
		if err != nil {
			return err
		}
		targets = append(targets, ng)
	} else {
		fmt.Fprintln(os.Stderr, "edgebench: nginx not found; attacking gordon-edge alone")
	}
	for _, t := range targets {
		if err := waitTLS(t.addr); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
	}
	fmt.Printf("edgebench attack: %d attacks × %d targets, each at most %s; %d CPUs\n", len(attacks), len(targets), min(*d, attackMax), numCPU())
	var results []attackResult
	for _, a := range attacks {
		if !strings.Contains(a.name, *only) {
			continue
		}
		for i, t := range targets {
			r := runAttack(a.name, a.run, t, backends[i], *d)
			fmt.Printf("  %-18s %-12s %s %s\n", r.Attack, r.Target, r.Bound, r.Error)
			results = append(results, r)
		}
	}
	edgeResults := runEdgeAttacks(tmp, *edgeBin, *only, procs.start, *d)
	printAttacks(os.Stdout, results)
	printEdgeAttacks(os.Stdout, edgeResults)
	if *jsonOut != "" {
		return writeAttackJSON(*jsonOut, results, edgeResults)
	}
	return nil
}

// printAttacks prints the attack × target table.
func printAttacks(w io.Writer, results []attackResult) {
	fmt.Fprintf(w, "\n%-18s %-12s %8s %9s %9s %6s  %s\n", "attack", "target", "normal", "quiet", "during", "ratio", "bound (GOAWAY)")
	pass := true
	for _, r := range results {
		bound := r.Bound
		if r.GoAway != "" {
			bound += " (GOAWAY " + r.GoAway + ")"
		}
		if r.Error != "" {
			bound += " error: " + r.Error
		}
		fmt.Fprintf(w, "%-18s %-12s %7.1f%% %9s %9s %6.2f  %s\n", r.Attack, r.Target, r.NormalSuccessPct,
			r.QuietMedianNS.Round(time.Microsecond), r.DuringMedianNS.Round(time.Microsecond), r.Ratio, bound)
		if r.Target == "gordon-edge" && (r.NormalSuccessPct < 100 || r.Ratio > 2) {
			pass = false
		}
	}
	fmt.Fprintln(w, "(normal = a separate h2 client's success rate during the attack; quiet/during = its median latency before/during; ratio = during/quiet)")
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "target gordon-edge: normal client 100%% and median within 2× quiet during every attack: %s\n", verdict)
}

func writeAttackJSON(path string, results []attackResult, edge []edgeAttack) error {
	b, err := json.MarshalIndent(struct {
		CPUs        int            `json:"cpus"`
		Results     []attackResult `json:"results"`
		EdgeResults []edgeAttack   `json:"edge_results,omitempty"`
	}{numCPU(), results, edge}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
