package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/bench/internal/proc"
)

// The HTTPS comparison (edgebench run -https): direct (the backend
// serving TLS itself), nginx (ssl + http2), Caddy (tls with files) and
// gordon-edge (--https-addr, the certificate added to its static store),
// every one with the same ECDSA P-256 certificate for bench.test, measured
// side by side in one run:
//   - keep-alive HTTPS throughput and p99 (raw HTTP/1.1 over TLS 1.3);
//   - new TLS connections per second (one request per connection, full
//     TLS 1.3 handshake, no resumption);
//   - HTTP/2 throughput with h2load (4 connections of 16 streams, each
//     connection making h2PerConn requests, then the next), when Debian's
//     nghttp2-client is installed;
//   - gordon-edge's RSS with 100 hosts and their certificates loaded.

// benchCert writes an ECDSA P-256 certificate for names to dir/cert.pem
// and dir/key.pem.
func benchCert(dir string, names ...string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return "", "", err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
}

// tlsBackendMain is `edgebench tls-backend -cert F -key F`: the backend
// serving the same body over TLS (the "direct" HTTPS target).
func tlsBackendMain(args []string) error {
	var certFile, keyFile string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "-cert":
			certFile = args[i+1]
		case "-key":
			keyFile = args[i+1]
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Println(ln.Addr().String())
	body := []byte("Hello, world\n")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", "13")
		_, _ = w.Write(body)
	})}
	return srv.ServeTLS(ln, certFile, keyFile)
}

// httpsTarget is one HTTPS target and its three figures.
type httpsTarget struct {
	name      string
	addr      string
	pids      func() []int
	keepAlive loadResult
	newConns  loadResult
	h2RPS     float64
	h2Err     string
}

// tlsDialer dials addr with TLS 1.3 for bench.test; sessions are never
// resumed (no cache), so each connection is a full handshake.
func tlsDialer(addr string) dialer {
	// X25519 only, as OpenSSL 3.0 clients (and nginx's side of it) speak:
	// Go's default would add the X25519MLKEM768 hybrid, which costs both
	// ends more and only the Go targets (direct, caddy, gordon-edge) would
	// pay it.
	cfg := &tls.Config{ServerName: "bench.test", InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{"http/1.1"},
		CurvePreferences: []tls.CurveID{tls.X25519}}
	return dialer{addr, func() (net.Conn, error) {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			return nil, err
		}
		return c, nil
	}}
}

var (
	h2loadTime = regexp.MustCompile(`finished in ([0-9.]+)(s|ms|us),`)
	h2loadOK   = regexp.MustCompile(` ([0-9]+) succeeded`)
)

// h2PerConn is how many requests h2load makes on each connection before
// it closes it and opens the next: fewer than the edge's per-connection
// stream budget (1,000 streams, then GOAWAY), which h2load
// would otherwise hit after 1,000 requests without reconnecting. nginx
// sends its GOAWAY after keepalive_requests (1,000 by default), so
// browsers and load balancers reconnect there too; the bench's nginx has
// it raised, and every target gets the same batches.
const h2PerConn = 990

// h2load runs Debian's h2load against addr: conns connections of 16
// streams each, every connection making h2PerConn requests, batch after
// batch until d has passed; it returns the requests that succeeded per
// second of h2load's own measured time (handshakes included, process
// starts not).
func h2load(addr string, conns int, d time.Duration) (float64, error) {
	bin, err := exec.LookPath("h2load")
	if err != nil {
		return 0, fmt.Errorf("h2load not installed (apt-get install nghttp2-client)")
	}
	_, port, _ := net.SplitHostPort(addr)
	var ok int64
	var spent time.Duration
	for end := time.Now().Add(d); time.Now().Before(end) || spent == 0; {
		out, err := exec.Command(bin, "-c", strconv.Itoa(conns), "-m", "16", "-t", "1", "-n", strconv.Itoa(conns*h2PerConn),
			"--connect-to="+addr, "https://bench.test:"+port+"/").CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("h2load: %v: %s", err, lastLine(out))
		}
		if !bytes.Contains(out, []byte("h2")) {
			return 0, fmt.Errorf("h2load did not negotiate h2: %s", lastLine(out))
		}
		m := h2loadTime.FindSubmatch(out)
		if m == nil {
			return 0, fmt.Errorf("h2load output not understood: %s", lastLine(out))
		}
		t, err := time.ParseDuration(string(m[1]) + string(m[2]))
		if err != nil {
			return 0, fmt.Errorf("h2load time %q: %v", m[0], err)
		}
		n := h2loadOK.FindSubmatch(out)
		if n == nil || string(n[1]) == "0" {
			return 0, fmt.Errorf("h2load: no request succeeded: %s", lastLine(out))
		}
		k, _ := strconv.ParseInt(string(n[1]), 10, 64)
		ok += k
		spent += t
	}
	return float64(ok) / spent.Seconds(), nil
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func nginxTLSConf(dir, listen, backend, cert, key string) string {
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
    listen %[2]s ssl http2;
    server_name bench.test;
    ssl_certificate %[4]s;
    ssl_certificate_key %[5]s;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache off;
    ssl_session_tickets off;
    http2_max_concurrent_streams 128;
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
`, dir, listen, backend, cert, key)
}

func caddyfile(listen, backend, cert, key string) string {
	_, port, _ := net.SplitHostPort(listen)
	return fmt.Sprintf(`{
	admin off
	auto_https disable_redirects
	skip_install_trust
	storage file_system %[5]s
	log {
		output discard
	}
}
https://bench.test:%[1]s {
	bind 127.0.0.1
	tls %[3]s %[4]s
	reverse_proxy %[2]s
}
`, port, backend, cert, key, filepath.Join(filepath.Dir(cert), "caddy-data"))
}

// waitTLS waits up to 10 s until a keep-alive HTTPS request answers.
func waitTLS(addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if _, err := runLoadDial(tlsDialer(addr), "bench.test", 1, 100*time.Millisecond, false); err == nil {
			return nil
		} else {
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not answering over TLS within 10s: %v", last)
}

// runHTTPS starts the HTTPS targets next to the plain ones (backend is
// the plain backend's address; start registers each process for cleanup)
// and measures them in interleaved rounds.
func runHTTPS(tmp, self, edgeBin, nginxBin, backendAddr string, conns, rounds int, d time.Duration,
	start func(string, *exec.Cmd) error) ([]*httpsTarget, int64, error) {
	targets, err := startHTTPSTargets(tmp, self, edgeBin, nginxBin, backendAddr, start)
	if err != nil {
		return nil, 0, err
	}
	for _, t := range targets {
		if err := waitTLS(t.addr); err != nil {
			return nil, 0, fmt.Errorf("%s: %w", t.name, err)
		}
		if _, err := runLoadDial(tlsDialer(t.addr), "bench.test", conns, time.Second, false); err != nil {
			return nil, 0, fmt.Errorf("%s warm-up: %w", t.name, err)
		}
	}
	if err := measureHTTPS(targets, conns, rounds, d); err != nil {
		return nil, 0, err
	}
	rss, err := rss100Hosts(tmp, edgeBin, backendAddr, start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "edgebench: RSS with 100 hosts:", err)
	}
	return targets, rss, nil
}

// startHTTPSTargets starts direct (the backend over TLS), nginx (when
// nginxBin is found), caddy (when installed) and gordon-edge, all with
// one certificate for bench.test.
func startHTTPSTargets(tmp, self, edgeBin, nginxBin, backendAddr string, start func(string, *exec.Cmd) error) ([]*httpsTarget, error) {
	certFile, keyFile, err := benchCert(filepath.Join(tmp, "tls"), "bench.test")
	if err != nil {
		return nil, err
	}
	var targets []*httpsTarget
	// direct: the backend itself over TLS.
	be := exec.Command(self, "tls-backend", "-cert", certFile, "-key", keyFile)
	out, err := be.StdoutPipe()
	if err != nil {
		return nil, err
	}
	be.Stderr = os.Stderr
	if err := start("tls backend", be); err != nil {
		return nil, err
	}
	addr, err := proc.ReadLine(out)
	if err != nil {
		return nil, err
	}
	targets = append(targets, &httpsTarget{name: "direct", addr: addr, pids: func() []int { return []int{be.Process.Pid} }})

	if path, err := exec.LookPath(nginxBin); nginxBin != "" && err == nil {
		t, err := startNginxTLS(tmp, path, backendAddr, certFile, keyFile, start)
		if err != nil {
			return nil, err
		}
		targets = append(targets, t)
	}
	if path, err := exec.LookPath("caddy"); err == nil {
		addr := freeAddr()
		cf := filepath.Join(tmp, "Caddyfile")
		if err := os.WriteFile(cf, []byte(caddyfile(addr, backendAddr, certFile, keyFile)), 0o644); err != nil {
			return nil, err
		}
		cmd := exec.Command(path, "run", "--config", cf, "--adapter", "caddyfile")
		cmd.Env = append(os.Environ(), "HOME="+tmp, "XDG_DATA_HOME="+filepath.Join(tmp, "caddy-xdg"), "XDG_CONFIG_HOME="+filepath.Join(tmp, "caddy-xdg"))
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := start("caddy", cmd); err != nil {
			return nil, err
		}
		pid := cmd.Process.Pid
		targets = append(targets, &httpsTarget{name: "caddy", addr: addr, pids: func() []int { return []int{pid} }})
	} else {
		fmt.Fprintln(os.Stderr, "edgebench: caddy not found (apt-get install caddy); skipping it")
	}

	t, err := startEdgeTLS(tmp, edgeBin, backendAddr, certFile, keyFile, start)
	if err != nil {
		return nil, err
	}
	targets = append(targets, t)
	return targets, nil
}

// startNginxTLS starts nginx (the binary at path) with ssl + http2 on
// the certificate, proxying to backendAddr.
func startNginxTLS(tmp, path, backendAddr, certFile, keyFile string, start func(string, *exec.Cmd) error) (*httpsTarget, error) {
	addr := freeAddr()
	dir := filepath.Join(tmp, "nginx-tls")
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, []byte(nginxTLSConf(dir, addr, backendAddr, certFile, keyFile)), 0o644); err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "-p", dir, "-c", conf)
	cmd.Stderr = os.Stderr
	if err := start("nginx tls", cmd); err != nil {
		return nil, err
	}
	master := cmd.Process.Pid
	return &httpsTarget{name: "nginx", addr: addr, pids: func() []int { return append([]int{master}, proc.Children(master)...) }}, nil
}

// startEdgeTLS starts gordon-edge with --https-addr, the certificate in
// its static store and a route for bench.test to backendAddr.
func startEdgeTLS(tmp, edgeBin, backendAddr, certFile, keyFile string, start func(string, *exec.Cmd) error) (*httpsTarget, error) {
	state := filepath.Join(tmp, "state-tls")
	static := filepath.Join(state, "edge", "certs", "static", "bench.test")
	if err := os.MkdirAll(static, 0o700); err != nil {
		return nil, err
	}
	for _, f := range []string{certFile, keyFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(static, filepath.Base(f)), b, 0o600); err != nil {
			return nil, err
		}
	}
	routes := fmt.Sprintf(`{"schema":1,"generation":1,"http":[{"host":"bench.test","app":"bench","service":"web","backends":[{"addr":%q,"container":"bench"}]}],"tcp":[],"udp":[]}`, backendAddr)
	if err := os.WriteFile(filepath.Join(state, "edge", "routes.json"), []byte(routes), 0o644); err != nil {
		return nil, err
	}
	eaddr := freeAddr()
	cmd := exec.Command(edgeBin, "run", "--state-dir", state, "--http-addr", freeAddr(), "--https-addr", eaddr, "--acme=false", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := start("gordon-edge tls", cmd); err != nil {
		return nil, err
	}
	epid := cmd.Process.Pid
	return &httpsTarget{name: "gordon-edge", addr: eaddr, pids: func() []int { return []int{epid} }}, nil
}

// measureHTTPS measures every target in interleaved rounds (see
// interleave): keep-alive, new connections and, while h2load works for
// the target, HTTP/2; it fills each target's merged figures.
func measureHTTPS(targets []*httpsTarget, conns, rounds int, d time.Duration) error {
	per := d / time.Duration(max(rounds, 1))
	ka := make([][]loadResult, len(targets))
	nc := make([][]loadResult, len(targets))
	h2 := make([][]float64, len(targets))
	err := interleave(len(targets), rounds, func(i int) error {
		t := targets[i]
		res, err := runLoadDial(tlsDialer(t.addr), "bench.test", conns, per, false)
		if err != nil {
			return fmt.Errorf("%s keep-alive: %w", t.name, err)
		}
		ka[i] = append(ka[i], res)
		res, err = runLoadDial(tlsDialer(t.addr), "bench.test", conns, per, true)
		if err != nil {
			return fmt.Errorf("%s new connections: %w", t.name, err)
		}
		nc[i] = append(nc[i], res)
		if t.h2Err == "" {
			rps, err := h2load(t.addr, 4, max(per, time.Second))
			if err != nil {
				t.h2Err = err.Error()
			} else {
				h2[i] = append(h2[i], rps)
			}
		}
		return nil
	}, func(r int) {
		fmt.Printf("  https round %d/%d:", r+1, max(rounds, 1))
		for i, t := range targets {
			fmt.Printf(" %s %.0f/%.0f", t.name, ka[i][r].RPS(), nc[i][r].RPS())
		}
		fmt.Println(" (keep-alive req/s / new conns/s)")
	})
	if err != nil {
		return err
	}
	for i, t := range targets {
		t.keepAlive, t.newConns = mergeResults(ka[i]), mergeResults(nc[i])
		var sum float64
		for _, v := range h2[i] {
			sum += v
		}
		if len(h2[i]) > 0 {
			t.h2RPS = sum / float64(len(h2[i]))
		}
	}
	return nil
}

// rss100Hosts starts a gordon-edge with 100 routed hosts, each with its
// own static certificate, makes one HTTPS request to every host (so each
// certificate was served) and returns its VmRSS in KiB.
func rss100Hosts(tmp, edgeBin, backendAddr string, start func(string, *exec.Cmd) error) (int64, error) {
	state := filepath.Join(tmp, "state-100")
	var routes []string
	for i := range 100 {
		host := fmt.Sprintf("h%03d.bench.test", i)
		if _, _, err := benchCert(filepath.Join(state, "edge", "certs", "static", host), host); err != nil {
			return 0, err
		}
		routes = append(routes, fmt.Sprintf(`{"host":%q,"app":"bench","service":"s%03d","backends":[{"addr":%q,"container":"bench"}]}`, host, i, backendAddr))
	}
	table := `{"schema":1,"generation":1,"http":[` + strings.Join(routes, ",") + `],"tcp":[],"udp":[]}`
	if err := os.WriteFile(filepath.Join(state, "edge", "routes.json"), []byte(table), 0o644); err != nil {
		return 0, err
	}
	addr := freeAddr()
	cmd := exec.Command(edgeBin, "run", "--state-dir", state, "--http-addr", freeAddr(), "--https-addr", addr, "--acme=false", "--log-level", "warn")
	cmd.Stderr = os.Stderr
	if err := start("gordon-edge 100 hosts", cmd); err != nil {
		return 0, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 100; i++ {
		host := fmt.Sprintf("h%03d.bench.test", i)
		cfg := &tls.Config{ServerName: host, InsecureSkipVerify: true}
		for {
			c, err := tls.Dial("tcp", addr, cfg)
			if err == nil {
				_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
				_, _ = io.Copy(io.Discard, c)
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("host %s: %w", host, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	time.Sleep(time.Second)
	return proc.RSSKiB(cmd.Process.Pid), nil
}

func printHTTPS(w io.Writer, targets []*httpsTarget, rss100 int64) {
	fmt.Fprintf(w, "\nHTTPS (same ECDSA P-256 certificate everywhere; TLS 1.3)\n%-12s %12s %9s %12s %9s %14s\n", "target", "keep-alive/s", "p99", "new conns/s", "p99", "h2 req/s (16)")
	var ng, ed, cd *httpsTarget
	for _, t := range targets {
		h2 := fmt.Sprintf("%.0f", t.h2RPS)
		if t.h2Err != "" {
			h2 = "-"
		}
		fmt.Fprintf(w, "%-12s %12.0f %9s %12.0f %9s %14s\n", t.name, t.keepAlive.RPS(), t.keepAlive.P99.Round(time.Microsecond),
			t.newConns.RPS(), t.newConns.P99.Round(time.Microsecond), h2)
		switch t.name {
		case "nginx":
			ng = t
		case "gordon-edge":
			ed = t
		case "caddy":
			cd = t
		}
		if t.h2Err != "" {
			fmt.Fprintf(w, "  (%s h2: %s)\n", t.name, t.h2Err)
		}
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	if ed != nil && ng != nil {
		fmt.Fprintf(w, "target https keep-alive >= 1.0 x nginx: %s (%.2f x)\n", verdict(ed.keepAlive.RPS() >= ng.keepAlive.RPS()), ed.keepAlive.RPS()/ng.keepAlive.RPS())
		fmt.Fprintf(w, "target https p99 <= nginx: %s (%.2f x)\n", verdict(ed.keepAlive.P99 <= ng.keepAlive.P99), float64(ed.keepAlive.P99)/float64(ng.keepAlive.P99))
		fmt.Fprintf(w, "target new TLS conns/s >= 0.9 x nginx: %s (%.2f x)\n", verdict(ed.newConns.RPS() >= 0.9*ng.newConns.RPS()), ed.newConns.RPS()/ng.newConns.RPS())
		if ed.h2RPS > 0 && ng.h2RPS > 0 {
			fmt.Fprintf(w, "target h2 >= 1.0 x nginx: %s (%.2f x)\n", verdict(ed.h2RPS >= ng.h2RPS), ed.h2RPS/ng.h2RPS)
		}
	}
	if ed != nil && cd != nil {
		fmt.Fprintf(w, "(vs caddy: keep-alive %.2f x, new conns %.2f x", ed.keepAlive.RPS()/cd.keepAlive.RPS(), ed.newConns.RPS()/cd.newConns.RPS())
		if ed.h2RPS > 0 && cd.h2RPS > 0 {
			fmt.Fprintf(w, ", h2 %.2f x", ed.h2RPS/cd.h2RPS)
		}
		fmt.Fprintln(w, ")")
	}
	if rss100 > 0 {
		fmt.Fprintf(w, "target rss with 100 hosts and certificates < 40 MiB: %s (%.1f MiB)\n", verdict(rss100 < 40*1024), float64(rss100)/1024)
	}
}

// jsonHTTPS is one HTTPS target in the -json output.
type jsonHTTPS struct {
	Name         string        `json:"name"`
	KeepAliveRPS float64       `json:"keepalive_rps"`
	KeepAliveP99 time.Duration `json:"keepalive_p99_ns"`
	NewConnsRPS  float64       `json:"new_conns_rps"`
	NewConnsP99  time.Duration `json:"new_conns_p99_ns"`
	H2RPS        float64       `json:"h2_rps,omitempty"`
	Errors       int64         `json:"errors"`
}

func httpsJSON(targets []*httpsTarget) []jsonHTTPS {
	var out []jsonHTTPS
	for _, t := range targets {
		out = append(out, jsonHTTPS{Name: t.name, KeepAliveRPS: t.keepAlive.RPS(), KeepAliveP99: t.keepAlive.P99,
			NewConnsRPS: t.newConns.RPS(), NewConnsP99: t.newConns.P99, H2RPS: t.h2RPS, Errors: t.keepAlive.Errors + t.newConns.Errors})
	}
	return out
}
