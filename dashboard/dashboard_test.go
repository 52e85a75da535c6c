package dashboard

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gordon-deploy/docker-gordon/core"
)

// TestPages_RenderAppsAppAndOp: the apps page lists every app with its
// state and last operation; the app page its instances (address, state,
// uptime), the edge's figures per generation, its operations, its access
// log lines (filtered by status and path) and its certificates; the op
// page the steps with phases and hook output; each names the CLI command
// of the next step.
func TestPages_RenderAppsAppAndOp(t *testing.T) {
	f := newFixture(t)
	for i, app := range []string{"blog", "shop", "wiki"} {
		f.seedApp(app, i+1)
	}
	backend := "10.0.0.3:30002" // shop's instance
	n := 0
	f.metrics = func() string { n += 100; return metricsText("shop", backend, n, n/10) }
	now := time.Now().UTC().Format(time.RFC3339Nano)
	f.access = fmt.Sprintf(`{"time":%q,"host":"shop.example.com","method":"GET","path":"/api/cart","status":502,"duration_ms":3.5,"app":"shop","service":"web","instance":"1"}
{"time":%q,"host":"shop.example.com","method":"GET","path":"/index.html","status":200,"duration_ms":1.2,"app":"shop","service":"web","instance":"1"}
{"time":%q,"host":"blog.example.com","method":"GET","path":"/blog-only","status":200,"duration_ms":1,"app":"blog","service":"web"}
`, now, now, now)
	f.certs = []core.CertInfo{{Host: "shop.example.com", Source: "acme", State: "valid", NotAfter: time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)}}
	f.sections = func(app string) []Section {
		return []Section{{Title: "Snapshots", Columns: []string{"ID"}, Empty: "No snapshot yet.", Command: "snapshots ls " + app}}
	}
	ts, feed := f.serve(MinInterval, "")
	// Two samples of the edge's counters make a rate.
	require.Eventually(t, func() bool {
		s, err := feed.Latest(context.Background())
		return err == nil && s.Seq >= 2
	}, 5*time.Second, 10*time.Millisecond)

	code, body := get(t, ts.URL+"/")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{"blog", "shop", "wiki", "running", "rev-1", "1/1", "docker gordon deploy -f FILE", "shop.example.com"} {
		assertHas(t, body, want)
	}
	code, body = get(t, ts.URL+"/app/shop")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{"10.0.0.3:30002", "running", ">1h0m<", "serving", "p99", "/api/cart", "/index.html",
		"2027-03-01", "op-shop-1", "docker gordon rollback shop", "docker gordon logs shop --access", "No snapshot yet.", "docker gordon snapshots ls shop"} {
		assertHas(t, body, want)
	}
	assert.False(t, strings.Contains(body, "/blog-only"), "another app's access lines")
	assert.Regexp(t, `class="num rps">[1-9][0-9]*\.[0-9]<`, body, "a request rate from two samples")

	_, body = get(t, ts.URL+"/app/shop?status=5xx&path=/api")
	assert.Contains(t, body, "/api/cart")
	assert.NotContains(t, body, "/index.html")
	_, body = get(t, ts.URL+"/app/shop?status=200")
	assert.NotContains(t, body, "/api/cart")
	assert.Contains(t, body, "/index.html")

	code, body = get(t, ts.URL+"/app/shop/op/op-shop-1")
	require.Equal(t, http.StatusOK, code)
	for _, want := range []string{"service.web.deploy", "create 120ms, probe 1s", "migrated 3 tables", "success", "docker gordon ops shop op-shop-1"} {
		assertHas(t, body, want)
	}
	code, body = get(t, ts.URL+"/app/nope")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, body, `app &#34;nope&#34; is not in the state directory`)
	code, _ = get(t, ts.URL+"/static/app.js")
	assert.Equal(t, http.StatusOK, code)
}

// TestPages_WorkWithoutJavaScript: everything a page shows is in its HTML;
// the script only subscribes to the live part, and the page says so.
func TestPages_WorkWithoutJavaScript(t *testing.T) {
	f := newFixture(t)
	f.seedApp("blog", 1)
	ts, _ := f.serve(time.Minute, "")
	_, body := get(t, ts.URL+"/app/blog")
	assert.Contains(t, body, `<main id="live" tabindex="-1">`)
	assert.Contains(t, body, "service.web.deploy"[:0]+"op-blog-1")
	assert.Contains(t, body, `<form class="filter" method="get"`)
	assert.Contains(t, body, `<script src="/static/app.js" defer></script>`)
	assert.NotContains(t, body, "<script>", "no inline script (the CSP forbids it)")
}

// readEvent reads one server-sent event's data (its data lines joined).
func readEvent(r *bufio.Reader) (string, error) {
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && data != nil:
			return strings.Join(data, "\n"), nil
		case strings.HasPrefix(line, "data: "):
			data = append(data, line[len("data: "):])
		}
	}
}

// TestEvents_DeliverAJournalWriteWithinASecond: with the periodic read a
// minute away, a step journaled for a running op reaches an open op page's
// event stream within 1 s (the watch of the journal's files).
func TestEvents_DeliverAJournalWriteWithinASecond(t *testing.T) {
	f := newFixture(t)
	f.seedApp("blog", 1)
	ctx := context.Background()
	op := core.Operation{ID: "op-blog-2", Kind: "deploy", App: "blog", Revision: "rev-2", StartedAt: time.Now().UTC(),
		Steps: []core.Step{{ID: "preflight", State: core.StepSucceeded}}}
	_, _, err := f.store.ClaimOp(ctx, op)
	require.NoError(t, err)
	ts, _ := f.serve(time.Minute, "")

	resp, err := http.Get(ts.URL + "/events?page=/app/blog/op/op-blog-2")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	r := bufio.NewReader(resp.Body)
	first, err := readEvent(r)
	require.NoError(t, err)
	assert.Contains(t, first, "preflight")
	assert.NotContains(t, first, "service.web.probe")

	op.Steps = append(op.Steps, core.Step{ID: "service.web.probe", State: core.StepPending, Service: "web"})
	written := time.Now()
	require.NoError(t, f.store.SaveOp(ctx, op))
	got := make(chan time.Duration, 1)
	go func() {
		for {
			ev, err := readEvent(r)
			if err != nil {
				return
			}
			if strings.Contains(ev, "service.web.probe") {
				got <- time.Since(written)
				return
			}
		}
	}()
	select {
	case d := <-got:
		t.Logf("journal write to event: %s", d)
	case <-time.After(time.Second):
		t.Fatal("the journaled step did not reach the page within 1 s")
	}
}

// TestEvents_ClientThatLeavesLeavesNoGoroutine: a client that closes its
// event stream ends the stream's subscription and goroutines.
func TestEvents_ClientThatLeavesLeavesNoGoroutine(t *testing.T) {
	f := newFixture(t)
	f.seedApp("blog", 1)
	ts, feed := f.serve(time.Minute, "")
	_, _ = get(t, ts.URL+"/") // the server's own goroutines are up
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/events?page=/", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, err = readEvent(bufio.NewReader(resp.Body))
		require.NoError(t, err)
		require.Equal(t, 1, feed.Subscribers())
		cancel()
		_ = resp.Body.Close()
		require.Eventually(t, func() bool { return feed.Subscribers() == 0 }, 5*time.Second, 5*time.Millisecond)
	}
	http.DefaultClient.CloseIdleConnections()
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before }, 5*time.Second, 10*time.Millisecond,
		"goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// TestAccess_NonLoopbackNeedsAToken: a non-loopback address is refused
// without a token; with one, a request without it gets 401, with it (as
// a bearer, or once in ?token=, then a cookie) the page.
func TestAccess_NonLoopbackNeedsAToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9190", ":9190", "192.168.1.10:9190", "[::]:9190", "example.com:9190"} {
		err := CheckAddr(addr, false)
		require.Error(t, err, addr)
		assert.ErrorIs(t, err, core.ErrInvalid)
		assert.Contains(t, err.Error(), "--token-file")
		assert.NoError(t, CheckAddr(addr, true), addr)
	}
	for _, addr := range []string{"127.0.0.1:9190", "[::1]:9190", "localhost:0", "127.0.0.2:1"} {
		assert.NoError(t, CheckAddr(addr, false), addr)
	}
	assert.Error(t, CheckAddr("9190", false))

	f := newFixture(t)
	f.seedApp("blog", 1)
	const token = "0123456789abcdef0123"
	ts, _ := f.serve(time.Minute, token)
	for _, path := range []string{"/", "/app/blog", "/events?page=/", "/static/app.js"} {
		code, _ := get(t, ts.URL+path)
		assert.Equal(t, http.StatusUnauthorized, code, path)
		code, _ = get(t, ts.URL+path, "Authorization", "Bearer wrong-token-0000000")
		assert.Equal(t, http.StatusUnauthorized, code, path)
	}
	code, body := get(t, ts.URL+"/app/blog", "Authorization", "Bearer "+token)
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "op-blog-1")

	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/app/blog?token="+token, nil)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	assert.Equal(t, "/app/blog", resp.Header.Get("Location"))
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == tokenCookie {
			cookie = c.Name + "=" + c.Value
			assert.True(t, c.HttpOnly)
		}
	}
	code, _ = get(t, ts.URL+"/app/blog", "Cookie", cookie)
	assert.Equal(t, http.StatusOK, code)
}

func TestReadToken_RefusesAShortToken(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/tok"
	require.NoError(t, writeFile(p, "short\n"))
	_, err := ReadToken(p)
	assert.ErrorIs(t, err, core.ErrInvalid)
	require.NoError(t, writeFile(p, "  0123456789abcdef  \nignored\n"))
	tok, err := ReadToken(p)
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef", tok)
}

// assertHas is assert.Contains without the whole page in the message.
func assertHas(t *testing.T, body, want string) {
	t.Helper()
	if !strings.Contains(body, want) {
		t.Errorf("the page does not show %q", want)
	}
}

// A dashboard without a token answers only requests addressed to a
// loopback name: a page that points its own DNS name at 127.0.0.1 (DNS
// rebinding) gets 403 and no app's state.
func TestAccess_WithoutATokenOnlyLoopbackHostsAreAnswered(t *testing.T) {
	f := newFixture(t)
	f.seedApp("blog", 1)
	ts, _ := f.serve(time.Minute, "")
	status := func(host string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, ts.URL+"/app/blog", nil)
		require.NoError(t, err)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, host := range []string{"attacker.example:9190", "attacker.example", "10.0.0.1:9190", "localhost.attacker.example"} {
		code, body := status(host)
		assert.Equal(t, http.StatusForbidden, code, host)
		assert.NotContains(t, body, "op-blog-1", host)
		assert.Contains(t, body, "--token-file", host)
	}
	for _, host := range []string{"127.0.0.1:9190", "localhost:9190", "LOCALHOST", "[::1]:9190", "127.0.0.2"} {
		code, body := status(host)
		assert.Equal(t, http.StatusOK, code, host)
		assert.Contains(t, body, "op-blog-1", host)
	}
}
