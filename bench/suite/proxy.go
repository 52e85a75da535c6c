package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// apiProxy is a counting reverse proxy for the Docker Engine API on a unix
// socket: point DOCKER_HOST=unix://<Socket> at it and every request the
// docker CLI, docker-gordon and its backend plugins make is forwarded to
// the real engine and recorded (method, normalized path, start and end).
// Nothing is guessed: the counts and the time spent waiting on the engine
// come from these records.
type apiProxy struct {
	Socket string
	srv    *http.Server

	mu    sync.Mutex
	calls []apiCall
}

// apiCall is one forwarded request; End is when the response body was
// fully relayed (or the stream ended).
type apiCall struct {
	Method, Path string
	Stream       bool // events, logs follow, attach: excluded from wait time
	Start, End   time.Time
}

// upstreamDial returns a dialer for the engine DOCKER_HOST names (unix or
// tcp; default /var/run/docker.sock).
func upstreamDial() func(ctx context.Context, _, _ string) (net.Conn, error) {
	network, addr := "unix", "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		if u, err := url.Parse(h); err == nil {
			switch u.Scheme {
			case "unix":
				addr = u.Path
			case "tcp":
				network, addr = "tcp", u.Host
			}
		}
	}
	var d net.Dialer
	return func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, network, addr) }
}

func startAPIProxy(socket string) (*apiProxy, error) {
	_ = os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	p := &apiProxy{Socket: socket}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = "docker"
			r.Out.Host = r.In.Host
		},
		Transport: &http.Transport{
			DialContext:         upstreamDial(),
			MaxIdleConnsPerHost: 64,
			DisableCompression:  true,
		},
		FlushInterval: -1,
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := apiCall{Method: r.Method, Path: normalizePath(r.URL.Path), Start: time.Now()}
		c.Stream = strings.HasSuffix(c.Path, "/events") || strings.HasSuffix(c.Path, "/attach") ||
			(strings.HasSuffix(c.Path, "/logs") && r.URL.Query().Get("follow") != "" && r.URL.Query().Get("follow") != "0" && r.URL.Query().Get("follow") != "false") ||
			strings.HasSuffix(c.Path, "/wait")
		rp.ServeHTTP(w, r)
		c.End = time.Now()
		p.mu.Lock()
		p.calls = append(p.calls, c)
		p.mu.Unlock()
	})}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Host is the DOCKER_HOST value for the proxy.
func (p *apiProxy) Host() string { return "unix://" + p.Socket }

// Close stops the proxy.
func (p *apiProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	_ = p.srv.Close()
	_ = os.Remove(p.Socket)
}

// Between returns the calls that started in [from, to].
func (p *apiProxy) Between(from, to time.Time) []apiCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []apiCall
	for _, c := range p.calls {
		if !c.Start.Before(from) && !c.Start.After(to) {
			out = append(out, c)
		}
	}
	return out
}

var (
	apiVersionRE = regexp.MustCompile(`^/v[0-9]+\.[0-9]+`)
	idRE         = regexp.MustCompile(`^[0-9a-f]{12,64}$`)
)

// normalizePath strips the API version and replaces object ids and names
// with {id} so calls group by endpoint.
func normalizePath(p string) string {
	p = apiVersionRE.ReplaceAllString(p, "")
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(segs) >= 2 {
		switch segs[0] {
		case "containers", "networks", "volumes", "exec":
			switch segs[1] {
			case "json", "create", "prune":
			default:
				segs[1] = "{id}"
			}
		case "images":
			switch segs[1] {
			case "json", "create", "prune", "load", "search", "get":
			default:
				// Image names may contain slashes: keep only the verb.
				segs = []string{"images", "{ref}", segs[len(segs)-1]}
			}
		}
	}
	for i, s := range segs {
		if idRE.MatchString(s) {
			segs[i] = "{id}"
		}
	}
	return "/" + strings.Join(segs, "/")
}

// intervals is a set of [start, end) spans.
type interval struct{ Start, End time.Time }

// unionLen is the total length covered by spans clipped to [from, to].
func unionLen(spans []interval, from, to time.Time) time.Duration {
	var s []interval
	for _, iv := range spans {
		a, b := iv.Start, iv.End
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			s = append(s, interval{a, b})
		}
	}
	slices.SortFunc(s, func(x, y interval) int { return x.Start.Compare(y.Start) })
	var total time.Duration
	var cur interval
	for i, iv := range s {
		if i == 0 {
			cur = iv
			continue
		}
		if !iv.Start.After(cur.End) {
			if iv.End.After(cur.End) {
				cur.End = iv.End
			}
			continue
		}
		total += cur.End.Sub(cur.Start)
		cur = iv
	}
	if len(s) > 0 {
		total += cur.End.Sub(cur.Start)
	}
	return total
}

// waitSpans are the non-streaming calls as intervals.
func waitSpans(calls []apiCall) []interval {
	var out []interval
	for _, c := range calls {
		if !c.Stream {
			out = append(out, interval{c.Start, c.End})
		}
	}
	return out
}

// endpointCounts groups calls by "METHOD path", most frequent first.
func endpointCounts(calls []apiCall) []endpointCount {
	m := map[string]int{}
	for _, c := range calls {
		m[c.Method+" "+c.Path]++
	}
	var out []endpointCount
	for k, v := range m {
		out = append(out, endpointCount{k, v})
	}
	slices.SortFunc(out, func(a, b endpointCount) int {
		if a.N != b.N {
			return b.N - a.N
		}
		return strings.Compare(a.Endpoint, b.Endpoint)
	})
	return out
}

type endpointCount struct {
	Endpoint string `json:"endpoint"`
	N        int    `json:"n"`
}
