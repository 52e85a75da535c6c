package edgeproxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core/routetable"
	"github.com/gordon-deploy/docker-gordon/edgeproxy"
	"github.com/gordon-deploy/docker-gordon/edgeproxy/certstore"
)

// syncBuffer is an io.Writer tests read while the edge writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// accessLine is one access log line as the docs list its fields.
type accessLine struct {
	Time       string  `json:"time"`
	Host       string  `json:"host"`
	Method     string  `json:"method"`
	Path       string  `json:"path"`
	Status     int     `json:"status"`
	DurationMS float64 `json:"duration_ms"`
	BytesOut   int64   `json:"bytes_out"`
	App        string  `json:"app"`
	Service    string  `json:"service"`
	Instance   string  `json:"instance"`
	Client     string  `json:"client"`
	RequestID  string  `json:"request_id"`
	Protocol   string  `json:"protocol"`
}

// waitAccess polls buf (the edge flushes every 500 ms) until it holds n
// lines, within 5 s, and returns them decoded; a line that is not one
// JSON object with exactly the documented fields fails the test.
func waitAccess(t *testing.T, buf *syncBuffer, n int) []accessLine {
	t.Helper()
	linesOf := func() (string, []string) {
		text := buf.String()
		return text, strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	if !assert.Eventually(t, func() bool { text, lines := linesOf(); return text != "" && len(lines) >= n }, 5*time.Second, 20*time.Millisecond) {
		text, lines := linesOf()
		t.Fatalf("access log has %d lines after 5s, want %d:\n%s", len(lines), n, text)
	}
	_, lines := linesOf()
	out := make([]accessLine, 0, len(lines))
	for _, l := range lines {
		var fields map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &fields), "line %q", l)
		assert.Len(t, fields, 13, "line %q", l)
		var a accessLine
		dec := json.NewDecoder(strings.NewReader(l))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&a), "line %q", l)
		_, err := time.Parse(time.RFC3339Nano, a.Time)
		require.NoError(t, err)
		out = append(out, a)
	}
	return out
}

// idBackend answers "id=<X-Request-Id it got>" (so the test knows the
// length of the body and the id the backend saw).
func idBackend(t *testing.T) *httptest.Server {
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Seen-Id", r.Header.Get("X-Request-Id"))
		_, _ = io.WriteString(w, "id="+r.Header.Get("X-Request-Id"))
	}))
	t.Cleanup(b.Close)
	return b
}

// R74 (access log): every HTTP/1.1 request gets one line, with the host,
// method, path, status, body bytes, app, service, instance (container),
// client, the request id the backend saw and the protocol, whichever
// path served it: the event loop, a connection goroutine (no loops),
// net/http (a request with a body) and an unknown host's 404.
func TestAccessLogLinePerRequestOnEveryHTTP1Path(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loops int
	}{{"event loop", 0}, {"goroutine", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			b := idBackend(t)
			buf := &syncBuffer{}
			e := startEdge(t, func(c *edgeproxy.Config) { c.AccessLog = buf; c.EventLoops = tc.loops })
			e.publish(t, httpTable(1, route("log.test", addrOf(b))))

			resp, body := do(t, e, http.MethodGet, "log.test", "/a?b=1", "")
			post, postBody := do(t, e, http.MethodPost, "log.test", "/form", "payload")
			code, _ := e.get(t, "nobody.test", "/x")
			require.Equal(t, http.StatusNotFound, code)

			lines := waitAccess(t, buf, 3)
			require.Len(t, lines, 3)
			get, pst, unrouted := lines[0], lines[1], lines[2]
			for _, l := range []accessLine{get, pst} {
				assert.Equal(t, "log.test", l.Host)
				assert.Equal(t, 200, l.Status)
				assert.Equal(t, "app", l.App)
				assert.Equal(t, "web", l.Service)
				assert.Equal(t, "c-"+addrOf(b), l.Instance)
				assert.Equal(t, "127.0.0.1", l.Client)
				assert.Equal(t, "HTTP/1.1", l.Protocol)
				assert.Len(t, l.RequestID, 32)
				assert.GreaterOrEqual(t, l.DurationMS, 0.0)
			}
			assert.Equal(t, "GET", get.Method)
			assert.Equal(t, "/a?b=1", get.Path)
			assert.Equal(t, resp.Header.Get("X-Seen-Id"), get.RequestID, "the id logged is the one the backend got")
			assert.Equal(t, int64(len(body)), get.BytesOut)
			assert.Equal(t, "POST", pst.Method)
			assert.Equal(t, "/form", pst.Path)
			assert.Equal(t, post.Header.Get("X-Seen-Id"), pst.RequestID)
			assert.Equal(t, int64(len(postBody)), pst.BytesOut)
			assert.Equal(t, "nobody.test", unrouted.Host)
			assert.Equal(t, 404, unrouted.Status)
			assert.Empty(t, unrouted.App)
		})
	}
}

// do sends one request through the edge and returns the response and its
// body.
func do(t *testing.T, e *edge, method, host, path, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+e.srv.HTTPAddr()+path, rd)
	require.NoError(t, err)
	req.Host = host
	resp, err := e.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	return resp, string(b)
}

// R74 (access log): a client's own X-Request-Id is the one logged, and
// behind a trusted proxy the client is the rightmost X-Forwarded-For
// entry that is not a trusted proxy; from an untrusted peer a claimed
// X-Forwarded-For is ignored.
func TestAccessLogClientAfterTrustedProxiesAndClientRequestID(t *testing.T) {
	b := idBackend(t)
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		want    string
	}{
		{"trusted", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("10.0.0.0/8")}, "203.0.113.9"},
		{"untrusted", nil, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := &syncBuffer{}
			e := startEdge(t, func(c *edgeproxy.Config) { c.AccessLog = buf; c.TrustedProxies = tc.trusted })
			e.publish(t, httpTable(1, route("xff.test", addrOf(b))))
			code, _ := e.get(t, "xff.test", "/", "X-Forwarded-For", "198.51.100.1, 203.0.113.9, 10.1.2.3", "X-Request-Id", "my-id-1")
			require.Equal(t, 200, code)
			l := waitAccess(t, buf, 1)[0]
			assert.Equal(t, tc.want, l.Client)
			assert.Equal(t, "my-id-1", l.RequestID)
		})
	}
}

// R74 (access log): HTTP/2 requests are logged with protocol "HTTP/2", on
// the fast path (GET) and through net/http (POST), with the request id
// the backend got.
func TestAccessLogHTTP2BothPaths(t *testing.T) {
	b := idBackend(t)
	buf := &syncBuffer{}
	ca := newTestCA(t)
	e := startEdge(t, func(c *edgeproxy.Config) {
		c.HTTPSAddr = "127.0.0.1:0"
		c.ACME.Disabled = true
		c.AccessLog = buf
	})
	cert, key := ca.valid(t, "h2log.test")
	_, err := certstore.AddStatic(e.stateDir, "h2log.test", cert, key, time.Now())
	require.NoError(t, err)
	e.publish(t, httpTable(1, tlsRoute("h2log.test", "", addrOf(b))))
	waitServed(t, e, "h2log.test", ca.pool)

	r := dialRawH2(t, e, "h2log.test")
	r.request(1, true, "GET", "/fast?x=1", "h2log.test")
	fast := r.readAnswer(1)
	require.Equal(t, "200", fast.status)
	r.request(3, false, "POST", "/slow", "h2log.test")
	require.NoError(t, r.fr.WriteData(3, true, []byte("x")))
	slow := r.readAnswer(3)
	require.Equal(t, "200", slow.status)

	lines := waitAccess(t, buf, 2)
	require.Len(t, lines, 2)
	byMethod := map[string]accessLine{lines[0].Method: lines[0], lines[1].Method: lines[1]}
	for method, a := range map[string]*h2Answer{"GET": fast, "POST": slow} {
		l := byMethod[method]
		assert.Equal(t, "HTTP/2", l.Protocol, method)
		assert.Equal(t, "h2log.test", l.Host, method)
		assert.Equal(t, 200, l.Status, method)
		assert.Equal(t, "127.0.0.1", l.Client, method)
		assert.Equal(t, "c-"+addrOf(b), l.Instance, method)
		assert.Equal(t, a.header["x-seen-id"], []string{l.RequestID}, method)
		assert.Equal(t, int64(a.body.Len()), l.BytesOut, method)
	}
	assert.Equal(t, "/fast?x=1", byMethod["GET"].Path)
	assert.Equal(t, "/slow", byMethod["POST"].Path)
}

// R74 (access log): lines still buffered when the edge stops are written
// (the flush at shutdown), and keep-alive pipelined requests on one
// connection each get their line.
func TestAccessLogFlushedAtShutdownAndOneLinePerPipelinedRequest(t *testing.T) {
	b := idBackend(t)
	buf := &syncBuffer{}
	e := startEdge(t, func(c *edgeproxy.Config) { c.AccessLog = buf })
	e.publish(t, httpTable(1, route("pipe.test", addrOf(b))))
	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	defer c.Close()
	const n = 5
	_, err = io.WriteString(c, strings.Repeat("GET /p HTTP/1.1\r\nHost: pipe.test\r\n\r\n", n))
	require.NoError(t, err)
	br := bufio.NewReader(c)
	for range n {
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	e.stop()
	// No wait: Run returned, so the shutdown flush has happened.
	text := buf.String()
	assert.Equal(t, n, strings.Count(text, "\n"), text)
	assert.Equal(t, n, strings.Count(text, `"path":"/p"`), text)
}

// R74 (access log): a request the edge answers itself gets its line too:
// a stopped service's 503 names the app and service (no instance).
func TestAccessLogLineForAnswersOfTheEdgeItself(t *testing.T) {
	buf := &syncBuffer{}
	e := startEdge(t, func(c *edgeproxy.Config) { c.AccessLog = buf })
	stopped := routetable.HTTPRoute{Host: "stopped.test", App: "app", Service: "web", Stopped: true}
	e.publish(t, httpTable(1, stopped))
	code, _ := e.get(t, "stopped.test", "/s")
	require.Equal(t, http.StatusServiceUnavailable, code)
	l := waitAccess(t, buf, 1)[0]
	assert.Equal(t, 503, l.Status)
	assert.Equal(t, "stopped.test", l.Host)
	assert.Equal(t, "/s", l.Path)
	assert.Equal(t, "app", l.App)
	assert.Equal(t, "web", l.Service)
	assert.Empty(t, l.Instance)
	assert.Positive(t, l.BytesOut, "the 503 page's body")
}

// R74 (access log): with the access log on, an upgrade still tunnels
// (the log's writer lets the proxy hijack the connection), and its line
// (101) is written when the tunnel ends.
func TestAccessLogUpgradeTunnelsAndIsLogged(t *testing.T) {
	b := tlsH1Backend(t)
	buf := &syncBuffer{}
	e := startEdge(t, func(c *edgeproxy.Config) { c.AccessLog = buf })
	e.publish(t, httpTable(1, route("up.test", addrOf(b))))
	c, err := net.Dial("tcp", e.srv.HTTPAddr())
	require.NoError(t, err)
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: up.test\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_, err = io.WriteString(c, "hi\n")
	require.NoError(t, err)
	line, err := br.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "echo http hi\n", line)
	c.Close()
	l := waitAccess(t, buf, 1)[0]
	assert.Equal(t, 101, l.Status)
	assert.Equal(t, "/ws", l.Path)
	assert.Equal(t, "app", l.App)
}
