// Package httpprobe is the built-in "http" readiness backend (SPEC R31):
// one GET per Check against the target's loopback bind. The engine
// (core/engine's ReadinessWaiter) owns retries and the budget.
package httpprobe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

const (
	// ClientCap bounds every attempt whatever AttemptTimeout says (R31).
	ClientCap = 5 * time.Second
	// Protocol is the probe plugin protocol version this backend speaks.
	Protocol = 1
	// maxDrain is how much of a response body is read before closing.
	maxDrain = 64 << 10
)

// Prober is the http readiness backend.
type Prober struct{}

// Interface guard.
var _ core.Prober = (*Prober)(nil)

// New returns the http prober.
func New() core.Prober { return &Prober{} }

// Describe returns name "http", protocol 1.
func (p *Prober) Describe(ctx context.Context) (core.ProbeInfo, error) {
	return core.ProbeInfo{Name: core.ReadinessHTTP, Protocol: Protocol}, nil
}

// ValidateConfig accepts only an empty config (absent, null or {}).
func (p *Prober) ValidateConfig(ctx context.Context, config json.RawMessage) ([]string, error) {
	if len(config) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(config, &m); err != nil {
		return []string{fmt.Sprintf("http probe: config is not a JSON object: %v", err)}, nil
	}
	if len(m) > 0 {
		return []string{fmt.Sprintf("http probe takes no config (got %d keys)", len(m))}, nil
	}
	return nil, nil
}

// Check makes one GET of http://<target.Address><path> (path from
// req.Readiness.Path, default "/") with Host = req.Target.Host when set
// (decision 9). Redirects are not followed and a 3xx is ready (ready on
// 200–399); the proxy environment is ignored; keep-alives are off; the
// attempt is bounded by req.AttemptTimeout (zero: the cap) and a 5 s cap.
// Not ready is (ProbeResult{Ready:false, Detail}, nil) with Detail like
// "GET http://127.0.0.1:18080/healthz: 503 Service Unavailable" or the
// dial error. ctx ending returns ctx's error; an empty address or a path
// that is not origin-form is an error wrapping core.ErrInvalid.
func (p *Prober) Check(ctx context.Context, req core.ProbeRequest) (core.ProbeResult, error) {
	if err := ctx.Err(); err != nil {
		return core.ProbeResult{}, err
	}
	t := req.Target
	if t.Address == "" {
		return core.ProbeResult{}, fmt.Errorf("%w: http probe of app %s service %s container %s: no loopback address to dial",
			core.ErrInvalid, t.App, t.Service, t.ContainerID)
	}
	target := URL(t.Address, req.Readiness.Path)
	timeout := req.AttemptTimeout
	if timeout <= 0 || timeout > ClientCap {
		timeout = ClientCap
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return core.ProbeResult{}, fmt.Errorf("%w: http probe of app %s service %s: bad readiness URL %q: %v",
			core.ErrInvalid, t.App, t.Service, target, err)
	}
	if t.Host != "" {
		hreq.Host = t.Host
	}
	hreq.Header.Set("User-Agent", "docker-gordon-probe/1")
	client := newClient(timeout)
	defer client.CloseIdleConnections()
	resp, err := client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return core.ProbeResult{}, ctx.Err()
		}
		return core.ProbeResult{Ready: false, Detail: "GET " + target + ": " + describe(err, timeout)}, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	detail := "GET " + target + ": " + resp.Status
	return core.ProbeResult{Ready: resp.StatusCode >= 200 && resp.StatusCode <= 399, Detail: detail}, nil
}

// URL is the probed URL: "http://" + addr + origin-form path ("/" when
// empty; a missing leading slash is added).
func URL(addr, path string) string {
	if path == "" {
		path = "/"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return "http://" + addr + path
}

// newClient is one attempt's client: no proxy, no redirects, no
// keep-alives, bounded by timeout.
func newClient(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil, // proxy environment ignored (R31)
		DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
		DisableKeepAlives:     true,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          1,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // no redirects followed (R31)
		},
	}
}

// describe turns a client error into a short detail: the underlying dial or
// read error, or "no response within <timeout>".
func describe(err error, timeout time.Duration) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return fmt.Sprintf("no response within %s", timeout)
		}
		return ue.Err.Error()
	}
	return err.Error()
}
