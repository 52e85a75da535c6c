package readiness

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
	"github.com/gordon-deploy/docker-gordon/core/readycheck"
)

// DefaultReadinessTimeout is the readiness budget when none is declared (R35).
const DefaultReadinessTimeout = readycheck.DefaultReadinessTimeout

// Readiness timing defaults (SPEC §4 "Defaults and numbers").
const (
	// DefaultHTTPProbeInterval is the pause between HTTP attempts (R31).
	DefaultHTTPProbeInterval = 1 * time.Second
	// HTTPAttemptCap bounds one HTTP attempt: min(2 s, remaining) (R31).
	HTTPAttemptCap = 2 * time.Second
	// DefaultTCPProbeInterval is the pause between TCP attempts (R33).
	DefaultTCPProbeInterval = 500 * time.Millisecond
	// DefaultLogProbeInterval is the log re-read interval (R34).
	DefaultLogProbeInterval = 1 * time.Second
	// DefaultPluginProbeInterval is the pause between custom plugin attempts.
	DefaultPluginProbeInterval = 1 * time.Second
	// PluginAttemptCap bounds one custom plugin attempt: min(5 s, remaining).
	PluginAttemptCap = 5 * time.Second
	// attemptGrace lets a capped backend's own timeout fire before the
	// engine's attempt context does.
	attemptGrace = 250 * time.Millisecond
)

// DeployReadiness returns the deploy-time probe of s (SPEC R29) when only
// the manifest is known: DeployReadinessFor(s, false).
func DeployReadiness(s *core.ServiceSpec) core.Readiness { return DeployReadinessFor(s, false) }

// DeployReadinessFor returns the deploy-time probe of s (SPEC R29) given
// whether its image has a HEALTHCHECK: readycheck.Deploy's check.
func DeployReadinessFor(s *core.ServiceSpec, imageHealthcheck bool) core.Readiness {
	return readycheck.Deploy(s, imageHealthcheck).Readiness
}

// DeclaredReadiness returns the check used to verify a running generation
// (start, boot, periodic pass): readycheck.Declared.
func DeclaredReadiness(s *core.ServiceSpec) core.Readiness { return readycheck.Declared(s) }

// ProbeTargetFor builds the probe target for r on a container (R30): the
// address of r.Port's tcp bind, the one the edge dials (R18):
// "<container IP>:<port>", or "127.0.0.1:<host port>" for a loopback
// bind. For http and tcp
// checks a zero port or a missing bind is an error wrapping ErrInvalid; log
// and plugin checks get an address only when a bind exists. The HTTP Host
// header follows decision 9: r.Host, else the service's first public host
// (a wildcard "*.example.com" becomes "readiness.example.com"), else the
// dialled address.
func ProbeTargetFor(app string, s *core.ServiceSpec, r core.Readiness, containerID string, startedAt time.Time, binds []core.BackendBind) (core.ProbeTarget, error) {
	t := core.ProbeTarget{
		App:         app,
		Service:     s.Name,
		ContainerID: containerID,
		Port:        r.Port,
		StartedAt:   startedAt,
		HTTP:        s.HTTP,
		TCP:         s.TCP,
		UDP:         s.UDP,
	}
	needsAddr := r.Type == core.ReadinessHTTP || r.Type == core.ReadinessTCP
	if r.Port == 0 {
		if needsAddr {
			return t, fmt.Errorf("%w: app %s service %s container %s: %s readiness has no port to probe (declare readiness.port)",
				core.ErrInvalid, app, s.Name, ShortID(containerID), r.Type)
		}
		return t, nil
	}
	for _, b := range binds {
		if b.ContainerPort == r.Port && (b.Protocol == "tcp" || b.Protocol == "") && b.HostPort > 0 {
			ip := b.IP
			if ip == "" {
				ip = "127.0.0.1"
			}
			t.Address = net.JoinHostPort(ip, strconv.Itoa(b.HostPort))
			break
		}
	}
	if t.Address == "" && needsAddr && internalOnlyPort(s, r.Port) {
		// R30, decision 18: probed from inside the app network.
		t.Internal = true
		if r.Type == core.ReadinessHTTP {
			t.Host = r.Host
		}
		return t, nil
	}
	if t.Address == "" && needsAddr {
		return t, fmt.Errorf("%w: app %s service %s container %s: readiness port %d/tcp has no backend address (is it running?)",
			core.ErrInvalid, app, s.Name, ShortID(containerID), r.Port)
	}
	if r.Type == core.ReadinessHTTP {
		t.Host = probeHost(s, r, t.Address)
	}
	return t, nil
}

// internalOnlyPort reports whether port is an internal HTTP port of s and
// no public HTTP or TCP interface (R30: never published to probe it).
func internalOnlyPort(s *core.ServiceSpec, port int) bool {
	for _, h := range s.HTTP {
		if h.Port == port && h.Public() {
			return false
		}
	}
	for _, t := range s.TCP {
		if t.Port == port {
			return false
		}
	}
	// An internal HTTP port, or a port no interface declares (tcp
	// readiness of an internal-only service, which the manifest allows).
	return true
}

// probeHost is decision 9's Host header.
func probeHost(s *core.ServiceSpec, r core.Readiness, addr string) string {
	if r.Host != "" {
		return r.Host
	}
	for _, h := range s.HTTP {
		if h.Public() && h.Host != "" {
			if rest, ok := strings.CutPrefix(h.Host, "*."); ok {
				return "readiness." + rest
			}
			return h.Host
		}
	}
	return addr
}

// shortID shortens a container ID for messages.
func ShortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// ReadinessWaiter runs readiness checks under a budget (R31–R35): it owns
// the retry interval and the budget; each Prober.Check is one attempt.
// Zero interval fields mean the SPEC §4 defaults.
type ReadinessWaiter struct {
	// Probes resolves the readiness type to a backend (required).
	Probes core.ProbeSet
	// HTTPInterval is the pause between HTTP attempts (default 1 s, R31).
	HTTPInterval time.Duration
	// TCPInterval is the pause between TCP attempts (default 500 ms, R33).
	TCPInterval time.Duration
	// LogInterval is the log re-read interval (default 1 s, R34).
	LogInterval time.Duration
	// PluginInterval is the pause between plugin attempts (default 1 s).
	PluginInterval time.Duration
}

// Every is a copy of w whose HTTP, TCP and plugin attempts are d apart
// (log probes keep their interval): a wait someone is held on, such as a
// wake's (R81), ends as soon as the service answers, not up to an
// interval later.
func (w *ReadinessWaiter) Every(d time.Duration) *ReadinessWaiter {
	if w == nil {
		return nil
	}
	c := *w
	c.HTTPInterval, c.TCPInterval, c.PluginInterval = d, d, d
	return &c
}

// WaitResult reports how a wait went.
type WaitResult struct {
	// Attempts is the number of Check calls made (0 for type none).
	Attempts int
	// LastDetail is the detail of the latest attempt.
	LastDetail string
	// Elapsed is the time since the wait started.
	Elapsed time.Duration
}

// ReadinessTimeoutError is the error of a readiness budget that ran out
// (R31, R33, R34). It wraps ErrUnavailable. Its text starts with the probe
// kind: "HTTP readiness timeout after 30s: GET http://…: <last detail>",
// "TCP readiness timeout after 30s on 127.0.0.1:18081 …: <last detail>".
type ReadinessTimeoutError struct {
	App, Service, Container string
	// Type is the readiness type (http, tcp, log, plugin).
	Type string
	// Plugin names the custom plugin for type plugin.
	Plugin string
	// Budget is the readiness timeout that ran out.
	Budget time.Duration
	// Address is the probed loopback address ("" for log probes).
	Address string
	// URL is the probed URL (http only).
	URL string
	// Pattern is the awaited log substring (log only).
	Pattern    string
	Attempts   int
	LastDetail string
}

// Error implements error.
func (e *ReadinessTimeoutError) Error() string {
	where := fmt.Sprintf("app %s, service %s, container %s, %d attempts", e.App, e.Service, ShortID(e.Container), e.Attempts)
	last := e.LastDetail
	if last == "" {
		last = "no attempt completed"
	}
	switch e.Type {
	case core.ReadinessHTTP:
		if !strings.Contains(last, e.URL) {
			last = "GET " + e.URL + ": " + last
		}
		return fmt.Sprintf("HTTP readiness timeout after %s: %s (%s)", e.Budget, last, where)
	case core.ReadinessTCP:
		return fmt.Sprintf("TCP readiness timeout after %s on %s (%s): %s", e.Budget, e.Address, where, last)
	case core.ReadinessLog:
		return fmt.Sprintf("log readiness timeout after %s: pattern %q not seen (%s): %s", e.Budget, e.Pattern, where, last)
	default:
		return fmt.Sprintf("plugin %s readiness timeout after %s (%s): %s", e.Plugin, e.Budget, where, last)
	}
}

// Unwrap makes errors.Is(err, ErrNotReady) and errors.Is(err,
// ErrUnavailable) hold.
func (e *ReadinessTimeoutError) Unwrap() []error {
	return []error{core.ErrNotReady, core.ErrUnavailable}
}

// Wait probes target with r until ready, the budget (r.Timeout, default
// 30 s) runs out, or ctx ends. Type "none" (or "") returns at once with 0
// attempts. The prober is resolved once through w.Probes.
//
// Per type: http retries every 1 s, each attempt bounded by min(2 s,
// remaining) (R31); tcp runs each attempt under the budget context and
// counts a success only if the budget had not expired at that moment, else
// waits 500 ms or until the budget ends (R33); log re-reads every 1 s and
// fails closed at once without a start time (R34, error wraps ErrInvalid);
// plugin retries every 1 s with attempts bounded by min(5 s, remaining).
//
// Errors: *ReadinessTimeoutError (wraps ErrUnavailable) when the budget ran
// out; ctx's own error, as is, when the caller's context ended (S42); a
// backend error (other than a context error) ends the wait at once, wrapped
// with app/service/container context.
// progress, if non-nil, is called after every failed attempt.
func (w *ReadinessWaiter) Wait(ctx context.Context, target core.ProbeTarget, r core.Readiness, progress func(WaitResult)) (WaitResult, error) {
	start := time.Now()
	res := WaitResult{}
	kind := r.Type
	if kind == "" || kind == core.ReadinessNone {
		return res, nil
	}
	where := fmt.Sprintf("app %s service %s container %s", target.App, target.Service, ShortID(target.ContainerID))
	if w == nil || w.Probes == nil {
		return res, fmt.Errorf("%w: %s: no probe backends configured", core.ErrUnavailable, where)
	}
	interval, attemptCap, err := w.cadence(kind, target, where)
	if err != nil {
		return res, err
	}
	budget := OrDefault(r.Timeout.D(), DefaultReadinessTimeout)
	// Resolving the backend (a plugin start) counts against the budget: a
	// plugin that never answers its handshake fails within the readiness
	// timeout, not the host's longer start timeout.
	pctx, pcancel := context.WithTimeout(ctx, budget)
	prober, err := w.Probes.Prober(pctx, kind, r.Plugin)
	pcancel()
	if err != nil {
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("%s: %s readiness backend: %w", where, kind, err)
	}
	config, err := readinessConfig(r, where)
	if err != nil {
		return res, err
	}
	timeoutErr := func() error {
		return &ReadinessTimeoutError{
			App: target.App, Service: target.Service, Container: target.ContainerID,
			Type: kind, Plugin: r.Plugin, Budget: budget, Address: target.Address,
			URL: probeURL(target, r), Pattern: r.Pattern,
			Attempts: res.Attempts, LastDetail: res.LastDetail,
		}
	}

	deadline := start.Add(budget)
	bctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	budgetLive := func() bool { return bctx.Err() == nil && time.Now().Before(deadline) }
	for {
		if !budgetLive() {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, timeoutErr()
		}
		remaining := time.Until(deadline)
		attempt := remaining
		if attemptCap > 0 && attemptCap < attempt {
			attempt = attemptCap
		}
		// A capped attempt gets a short grace beyond AttemptTimeout so the
		// backend's own bound (which yields a useful detail) fires first;
		// the budget context still bounds it hard.
		grace := time.Duration(0)
		if attemptCap > 0 {
			grace = attemptGrace
		}
		actx, acancel := context.WithTimeout(bctx, attempt+grace)
		pr, cerr := prober.Check(actx, core.ProbeRequest{Target: target, Readiness: r, Config: config, AttemptTimeout: attempt})
		attemptEnded := actx.Err() != nil || endedAtDeadline(actx, cerr)
		acancel()
		res.Attempts++
		res.Elapsed = time.Since(start)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		live := budgetLive()
		if done, err := judgeAttempt(&res, pr, cerr, attemptEnded, live, attempt); done {
			if err != nil {
				return res, fmt.Errorf("%s: %s readiness attempt %d: %w", where, kind, res.Attempts, err)
			}
			return res, nil
		}
		if progress != nil {
			progress(res)
		}
		if !live {
			continue
		}
		t := time.NewTimer(pauseAfter(kind, res.Attempts, interval))
		select {
		case <-bctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// ProbeRampStart is the first pause of a built-in probe (http, tcp, log):
// the pauses double from it (50, 100, 200, 400, 800 ms) until they reach
// the kind's interval. A container that listens a few milliseconds after
// its start is then seen ready within about 50 ms instead of a whole
// interval later (measured as the deploy's wall time against `docker run`
// + first 200).
const ProbeRampStart = 50 * time.Millisecond

// pauseAfter is the pause after failed attempt n (1-based) of kind.
func pauseAfter(kind string, n int, interval time.Duration) time.Duration {
	if kind == core.ReadinessPlugin || n < 1 || n > 16 {
		return interval
	}
	return min(interval, ProbeRampStart<<(n-1))
}

// attemptDeadlineSlack is how close to its attempt's deadline a check
// error counts as the attempt's own bound: a plugin gets the deadline over
// gRPC and its side may end the call (RST_STREAM CANCEL) a moment before
// the engine's context fires.
const attemptDeadlineSlack = 100 * time.Millisecond

// endedAtDeadline reports whether cerr came back within
// attemptDeadlineSlack of actx's deadline (R33: the attempt's bound, not a
// backend failure).
func endedAtDeadline(actx context.Context, cerr error) bool {
	dl, ok := actx.Deadline()
	return cerr != nil && ok && time.Until(dl) < attemptDeadlineSlack
}

// judgeAttempt records one attempt's verdict in res (R33). done is true
// when waiting ends: ready within the budget (err nil) or a check error
// that is not the attempt's own bound (err is that error, unwrapped). A
// verdict cut by the end of the budget keeps the last detail; a success
// after the budget does not count.
func judgeAttempt(res *WaitResult, pr core.ProbeResult, cerr error, attemptEnded, live bool, attempt time.Duration) (done bool, err error) {
	switch {
	case cerr != nil && attemptEnded && !live && res.LastDetail != "":
		// Cut by the end of the budget: no verdict; keep the last one.
	case cerr != nil && attemptEnded:
		res.LastDetail = fmt.Sprintf("attempt ended after %s: %v", attempt.Round(time.Millisecond), cerr)
	case cerr != nil:
		return true, cerr
	case pr.Ready && live:
		res.LastDetail = pr.Detail
		return true, nil
	case pr.Ready:
		// R33: a success observed after the budget ran out does not count.
		res.LastDetail = "ready only after the budget had expired"
		if pr.Detail != "" {
			res.LastDetail += ": " + pr.Detail
		}
	default:
		res.LastDetail = pr.Detail
		if res.LastDetail == "" {
			res.LastDetail = "not ready"
		}
	}
	return false, nil
}

// cadence returns the pause between attempts and the per-attempt cap (0:
// none) of a readiness kind; a log probe of a target with no start time
// and an unknown kind are ErrInvalid.
func (w *ReadinessWaiter) cadence(kind string, target core.ProbeTarget, where string) (interval, attemptCap time.Duration, err error) {
	switch kind {
	case core.ReadinessHTTP:
		interval, attemptCap = OrDefault(w.HTTPInterval, DefaultHTTPProbeInterval), HTTPAttemptCap
	case core.ReadinessTCP:
		interval = OrDefault(w.TCPInterval, DefaultTCPProbeInterval)
	case core.ReadinessLog:
		interval = OrDefault(w.LogInterval, DefaultLogProbeInterval)
		if target.StartedAt.IsZero() {
			return 0, 0, fmt.Errorf("%w: %s: log readiness: no start time: log probe fails closed", core.ErrInvalid, where)
		}
	case core.ReadinessPlugin:
		interval, attemptCap = OrDefault(w.PluginInterval, DefaultPluginProbeInterval), PluginAttemptCap
	default:
		return 0, 0, fmt.Errorf("%w: %s: unknown readiness type %q", core.ErrInvalid, where, kind)
	}
	return interval, attemptCap, nil
}

// readinessConfig is r.Config as the JSON a prober receives (nil when
// empty); a config that does not marshal is ErrInvalid.
func readinessConfig(r core.Readiness, where string) (json.RawMessage, error) {
	if len(r.Config) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(r.Config)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: readiness config: %w", core.ErrInvalid, where, err)
	}
	return b, nil
}

// probeURL is the URL an HTTP probe of target requests (R31).
func probeURL(target core.ProbeTarget, r core.Readiness) string {
	if r.Type != core.ReadinessHTTP {
		return ""
	}
	p := r.Path
	if p == "" {
		p = "/"
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return "http://" + target.Address + p
}

func OrDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
