package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// The edge's resource attacks of the security review (make bench-abuse,
// after the HTTP/2 ones): idle TCP clients on a relay, an SNI flood under
// a wildcard route, a login flood on one host. Each starts its own
// gordon-edge (loopback only), is bounded in count and time, and reports
// what a normal client saw. nginx has no on-demand certificates; its
// equivalents of the other two (the stream module, auth_basic) are not run
// here.

// edgeAttack is one row of the table (-json: "edge_results").
type edgeAttack struct {
	Attack  string             `json:"attack"`
	Target  string             `json:"target"`
	Bound   string             `json:"bound"`
	Pass    bool               `json:"pass"`
	Figures map[string]float64 `json:"figures"`
	Error   string             `json:"error,omitempty"`
}

type edgeAttackFunc func(tmp, edgeBin string, start func(string, *exec.Cmd) error, d time.Duration) (edgeAttack, error)

// edgeAttacks in the order they run.
var edgeAttacks = []struct {
	name string
	run  edgeAttackFunc
}{
	{"idle tcp 1500", attackIdleTCP},
	{"sni flood 3000", attackSNIFlood},
	{"login flood", attackLoginFlood},
}

// edgeProc is a gordon-edge started for one attack.
type edgeProc struct {
	state, http, admin string
	pid                int
}

// startEdgeFor writes routes (a routetable JSON) and starts gordon-edge on
// a state directory of its own under tmp, behind prefix (e.g. prlimit),
// and waits up to 10 s for its admin address and applied table.
func startEdgeFor(tmp, name, edgeBin, routes string, prefix []string, start func(string, *exec.Cmd) error, extra ...string) (*edgeProc, error) {
	e := &edgeProc{state: filepath.Join(tmp, "state-"+strings.ReplaceAll(name, " ", "-")), http: freeAddr()}
	if err := os.MkdirAll(filepath.Join(e.state, "edge"), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(e.state, "edge", "routes.json"), []byte(routes), 0o600); err != nil {
		return nil, err
	}
	args := append(append([]string{}, prefix...), edgeBin, "run", "--state-dir", e.state, "--http-addr", e.http,
		"--access-log", "off", "--log-level", "error", "--no-handover")
	cmd := exec.Command(args[0], append(args[1:], extra...)...)
	cmd.Stderr = os.Stderr
	if err := start("gordon-edge "+name, cmd); err != nil {
		return nil, err
	}
	e.pid = cmd.Process.Pid
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var st struct {
			Applied uint64 `json:"applied_generation"`
			Admin   string `json:"admin_addr"`
		}
		if b, err := os.ReadFile(filepath.Join(e.state, "edge", "status.json")); err == nil && json.Unmarshal(b, &st) == nil && st.Admin != "" && st.Applied == 1 {
			e.admin = st.Admin
			return e, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("gordon-edge %s: not serving its route table within 10 s", name)
}

// metrics reads the edge's /metrics series whose name starts with one of
// prefixes, summed over labels (none when it does not answer within 5 s).
func (e *edgeProc) metrics(prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	req, err := http.NewRequest(http.MethodGet, "http://"+e.admin+"/metrics", nil)
	if err != nil {
		return out
	}
	// Every admin request but /healthz carries the edge's admin token.
	if tok, err := os.ReadFile(filepath.Join(e.state, "edge", "admin.token")); err == nil {
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	cl := &http.Client{Timeout: 5 * time.Second} // an edge out of descriptors accepts nothing
	resp, err := cl.Do(req)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if strings.HasPrefix(line, "#") || sp < 0 {
			continue
		}
		name := line[:sp]
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = name[:i]
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				v, _ := strconv.ParseFloat(line[sp+1:], 64)
				out[name] += v
			}
		}
	}
	return out
}

// get sends GET / for host to the edge's HTTP address (5 s bound, a new
// connection) and returns the status (0: no answer).
func (e *edgeProc) get(host, user, pass string) int {
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.http+"/", nil)
	req.Host = host
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := cl.Do(req)
	if err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// plainBackend serves 200 "ok" on a loopback address until the attack ends.
func plainBackend() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// attackIdleTCP: the edge limited to 1,024 descriptors relays a TCP route
// to a backend that holds every connection; 1,500 clients connect and stay
// idle; then 20 HTTP requests must all be answered 200.
func attackIdleTCP(tmp, edgeBin string, start func(string, *exec.Cmd) error, d time.Duration) (edgeAttack, error) {
	const clients, requests = 1500, 20
	r := edgeAttack{Attack: "idle tcp 1500", Target: "gordon-edge", Figures: map[string]float64{}}
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		return r, fmt.Errorf("needs prlimit (util-linux)")
	}
	web, stop, err := plainBackend()
	if err != nil {
		return r, err
	}
	defer stop()
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return r, err
	}
	var held []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			c, err := hold.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, c)
			hmu.Unlock()
		}
	}()
	defer func() {
		_ = hold.Close()
		hmu.Lock()
		for _, c := range held {
			_ = c.Close()
		}
		hmu.Unlock()
	}()
	relay := freeAddr()
	routes := fmt.Sprintf(`{"schema":1,"generation":1,"http":[{"host":"app.test","app":"app","service":"web","backends":[{"addr":%q,"container":"web"}]}],"tcp":[{"listen":%q,"app":"app","service":"db","backend":%q,"container":"db"}],"udp":[]}`,
		web, relay, hold.Addr().String())
	e, err := startEdgeFor(tmp, "idle-tcp", edgeBin, routes, []string{prlimit, "--nofile=1024:1024"}, start)
	if err != nil {
		return r, err
	}
	conns := dialIdle(relay, clients, time.Now().Add(max(d, 5*time.Second)+10*time.Second))
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	// Let the edge see every connection (relayed or refused), at most 10 s.
	var m map[string]float64
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		m = e.metrics("gordon_edge_relay_")
		if m["gordon_edge_relay_connections"]+m["gordon_edge_relay_refused_total"] >= float64(len(conns)) {
			break
		}
	}
	ok := 0
	for range requests {
		if e.get("app.test", "", "") == http.StatusOK {
			ok++
		}
	}
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", e.pid))
	r.Figures = map[string]float64{"clients": float64(len(conns)), "relayed": m["gordon_edge_relay_connections"],
		"refused": m["gordon_edge_relay_refused_total"], "http_ok": float64(ok), "http_requests": requests, "edge_fds": float64(len(fds))}
	r.Pass = ok == requests
	r.Bound = fmt.Sprintf("HTTP %d/%d with %d idle clients at 1,024 fds (%.0f relayed, %.0f refused, %d fds open)",
		ok, requests, len(conns), m["gordon_edge_relay_connections"], m["gordon_edge_relay_refused_total"], len(fds))
	return r, nil
}

// dialIdle opens n connections to addr, 32 at a time, each within 5 s,
// none after deadline.
func dialIdle(addr string, n int, deadline time.Time) []net.Conn {
	var mu sync.Mutex
	var conns []net.Conn
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && time.Now().Before(deadline) {
				if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return conns
}

// attackSNIFlood: a route for *.wild.test over HTTPS, an ACME CA that
// cannot be reached, and 3,000 TLS handshakes with random names under it
// (32 at a time); the edge's goroutines and resident memory before and
// after, and how many orders it started.
func attackSNIFlood(tmp, edgeBin string, start func(string, *exec.Cmd) error, d time.Duration) (edgeAttack, error) {
	const names = 3000
	r := edgeAttack{Attack: "sni flood 3000", Target: "gordon-edge", Figures: map[string]float64{}}
	web, stop, err := plainBackend()
	if err != nil {
		return r, err
	}
	defer stop()
	https := freeAddr()
	routes := fmt.Sprintf(`{"schema":1,"generation":1,"http":[{"host":"*.wild.test","app":"app","service":"web","backends":[{"addr":%q,"container":"web"}]}],"tcp":[],"udp":[]}`, web)
	e, err := startEdgeFor(tmp, "sni-flood", edgeBin, routes, nil, start, "--https-addr", https, "--acme-ca", "http://127.0.0.1:1/directory")
	if err != nil {
		return r, err
	}
	series := []string{"go_goroutines", "process_resident_memory_bytes", "gordon_edge_tls_cert_events_total", "gordon_edge_tls_on_demand_refused_total"}
	before := e.metrics(series...)
	end := time.Now().Add(max(d, 5*time.Second) + 25*time.Second)
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= names && time.Now().Before(end); i = next.Add(1) {
				c, err := tls.DialWithDialer(&net.Dialer{Timeout: 3 * time.Second}, "tcp", https,
					&tls.Config{ServerName: fmt.Sprintf("r%06d.wild.test", i), InsecureSkipVerify: true})
				if err == nil {
					_ = c.Close()
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	after := e.metrics(series...)
	rss := func(m map[string]float64) float64 { return m["process_resident_memory_bytes"] / (1 << 20) }
	r.Figures = map[string]float64{"handshakes": float64(done.Load()),
		"goroutines_before": before["go_goroutines"], "goroutines_after": after["go_goroutines"],
		"rss_mb_before": rss(before), "rss_mb_after": rss(after),
		"orders_failed": after["gordon_edge_tls_cert_events_total"], "refused": after["gordon_edge_tls_on_demand_refused_total"]}
	r.Pass = after["go_goroutines"]-before["go_goroutines"] < 200 && rss(after)-rss(before) < 64
	r.Bound = fmt.Sprintf("%d names: goroutines %.0f → %.0f, RSS %.0f → %.0f MB, %.0f orders refused",
		done.Load(), before["go_goroutines"], after["go_goroutines"], rss(before), rss(after), after["gordon_edge_tls_on_demand_refused_total"])
	return r, nil
}

// attackLoginFlood: a.test (alice) and b.test (bob1..bob5), bcrypt cost
// 12; 8 clients send wrong passwords to a.test back to back while each bob
// logs in to b.test for the first time (nothing cached): every first
// login must be 200, never 429.
func attackLoginFlood(tmp, edgeBin string, start func(string, *exec.Cmd) error, d time.Duration) (edgeAttack, error) {
	r := edgeAttack{Attack: "login flood", Target: "gordon-edge", Figures: map[string]float64{}}
	web, stop, err := plainBackend()
	if err != nil {
		return r, err
	}
	defer stop()
	hash := func(user, pass string) (string, error) {
		h, err := bcrypt.GenerateFromPassword([]byte(pass), 12)
		return user + ":" + string(h), err
	}
	alice, err := hash("alice", "s3cret")
	if err != nil {
		return r, err
	}
	var bobs []string
	for i := 1; i <= 5; i++ {
		b, err := hash(fmt.Sprintf("bob%d", i), "hunter2")
		if err != nil {
			return r, err
		}
		bobs = append(bobs, b)
	}
	aj, _ := json.Marshal([]string{alice})
	bj, _ := json.Marshal(bobs)
	routes := fmt.Sprintf(`{"schema":1,"generation":1,"http":[{"host":"a.test","app":"a","service":"web","basic_auth":%s,"backends":[{"addr":%q,"container":"a"}]},{"host":"b.test","app":"b","service":"web","basic_auth":%s,"backends":[{"addr":%q,"container":"b"}]}],"tcp":[],"udp":[]}`,
		aj, web, bj, web)
	e, err := startEdgeFor(tmp, "login-flood", edgeBin, routes, nil, start)
	if err != nil {
		return r, err
	}
	stopFlood := make(chan struct{})
	var flood, flood429 atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10000; i++ {
				select {
				case <-stopFlood:
					return
				default:
				}
				if e.get("a.test", "alice", "wrong") == http.StatusTooManyRequests {
					flood429.Add(1)
				}
				flood.Add(1)
			}
		}()
	}
	time.Sleep(500 * time.Millisecond) // the flood holds a.test's slots
	ok, worst := 0, time.Duration(0)
	var codes []string
	for i := 1; i <= 5; i++ {
		t0 := time.Now()
		code := e.get("b.test", fmt.Sprintf("bob%d", i), "hunter2")
		worst = max(worst, time.Since(t0))
		codes = append(codes, strconv.Itoa(code))
		if code == http.StatusOK {
			ok++
		}
	}
	time.Sleep(max(0, min(d, 10*time.Second)-time.Second))
	close(stopFlood)
	wg.Wait()
	r.Figures = map[string]float64{"first_logins_ok": float64(ok), "first_logins": 5, "worst_first_login_ms": float64(worst.Milliseconds()),
		"flood_requests": float64(flood.Load()), "flood_429": float64(flood429.Load())}
	r.Pass = ok == 5
	r.Bound = fmt.Sprintf("b.test first logins %s (worst %s) while a.test got %d wrong passwords (%d answered 429)",
		strings.Join(codes, ","), worst.Round(time.Millisecond), flood.Load(), flood429.Load())
	return r, nil
}

// runEdgeAttacks runs the edge attacks whose name contains only.
func runEdgeAttacks(tmp, edgeBin, only string, start func(string, *exec.Cmd) error, d time.Duration) []edgeAttack {
	var out []edgeAttack
	for _, a := range edgeAttacks {
		if !strings.Contains(a.name, only) {
			continue
		}
		r, err := a.run(tmp, edgeBin, start, min(d, attackMax))
		r.Attack, r.Target = a.name, "gordon-edge"
		if err != nil {
			r.Error = err.Error()
		}
		fmt.Printf("  %-18s %-12s %s %s\n", r.Attack, r.Target, r.Bound, r.Error)
		out = append(out, r)
	}
	return out
}

// printEdgeAttacks prints the edge attacks' table and verdict.
func printEdgeAttacks(w io.Writer, results []edgeAttack) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-18s %-12s %-5s %s\n", "attack", "target", "pass", "what a normal client saw")
	pass := true
	for _, r := range results {
		fmt.Fprintf(w, "%-18s %-12s %-5t %s%s\n", r.Attack, r.Target, r.Pass, r.Bound, map[bool]string{true: " error: " + r.Error, false: ""}[r.Error != ""])
		pass = pass && r.Pass && r.Error == ""
	}
	verdict := "PASS"
	if !pass {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "gordon-edge resource attacks (HTTP served beside 1,500 idle TCP clients at 1,024 fds; SNI flood within 200 goroutines and 64 MB; no 429 for another host's first login): %s\n", verdict)
}
