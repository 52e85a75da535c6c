package loadgen

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// HTTPConfig is a StartHTTP run.
type HTTPConfig struct {
	// URL is requested by every client; Host, when set, is its Host header.
	URL, Host string
	// NetNS names the network namespace (under /var/run/netns) this
	// process runs in, when it is one a test created: then the target may
	// be any address (CheckTarget).
	NetNS string
	// Addr is the loopback host:port the clients dial ("": URL's host).
	// A NewClient must dial it.
	Addr    string
	Clients int
	// NewClient builds client i; nil: keep-alive HTTP/1.1 (one idle
	// connection, 5 s connect timeout, 30 s request timeout, no proxy).
	NewClient func(i int) *http.Client
	// Label names client i's class ("h1", "h2"); Stats.ByLabel counts
	// answered requests per label and error texts are prefixed with it.
	Label func(i int) string
	// Identity extracts the serving instance from a 2xx body; with it a
	// client that goes back to an instance it already left is a
	// regression (the body is read whole, else discarded).
	Identity func(body []byte) string
	// Check is asked about every 2xx answer (e.g. its protocol); an error
	// counts as Rejected.
	Check func(i int, resp *http.Response) error
	// FailurePause is slept after every failure, so a dead port is not
	// hammered (0: none).
	FailurePause time.Duration
	// AbortOnStop cancels the requests in flight at Stop and counts
	// nothing that ends after it; otherwise Stop waits for them (bounded
	// by the client's timeout) and counts their outcome.
	AbortOnStop bool
	// MaxErrors error texts are kept (default 10), only distinct ones
	// with DistinctErrors.
	MaxErrors      int
	DistinctErrors bool
	Bounds
}

// HTTPStats is what an HTTP run counted.
type HTTPStats struct {
	// Answered requests got a status line (any status); OK ones were
	// 2xx, read whole and passed Check.
	Answered, OK int64
	// Transport: no answer, or the body was cut. Non2xx: any other
	// status. Rejected: Check failed.
	Transport, Non2xx, Rejected int64
	// Regressions: a client went back to an instance it had left.
	Regressions int64
	// ByLabel is Answered per client label (with Label).
	ByLabel map[string]int64
	// P50, P99 and Max are over OK requests.
	P50, P99, Max time.Duration
	// LongestGap is the longest interval during which no client got an
	// OK answer (from Start to the last OK); LongestClientGap the longest
	// between two OK answers of one client (from its start).
	LongestGap, LongestClientGap time.Duration
	Elapsed                      time.Duration
	Errors                       []string
	// Bounded is true when the run ended at MaxRequests or MaxDuration
	// before Stop.
	Bounded bool
}

// Failed is every failed request: Transport + Non2xx + Rejected.
func (s HTTPStats) Failed() int64 { return s.Transport + s.Non2xx + s.Rejected }

// Requests is every counted request: OK + Failed.
func (s HTTPStats) Requests() int64 { return s.OK + s.Failed() }

func (s HTTPStats) String() string {
	return fmt.Sprintf("requests=%d transport_errors=%d non2xx=%d rejected=%d regressions=%d p50=%s p99=%s max=%s longest_gap=%s",
		s.Answered, s.Transport, s.Non2xx, s.Rejected, s.Regressions, s.P50, s.P99, s.Max, s.LongestGap.Round(time.Millisecond))
}

// HTTPRun is a running StartHTTP.
type HTTPRun struct {
	cfg     HTTPConfig
	max     int64
	t0      time.Time
	stop    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
	bounded atomic.Bool

	answered, ok, transport, non2xx, rejected, regressions atomic.Int64
	lastOK, maxGap, maxClientGap                           atomic.Int64 // unix nanos, nanos

	mu      sync.Mutex
	lat     []time.Duration
	byLabel map[string]int64
	errs    errorLog
}

// StartHTTP starts cfg.Clients clients; it fails only for a target that
// is not loopback (CheckTarget: any address inside a created namespace).
func StartHTTP(cfg HTTPConfig) (*HTTPRun, error) {
	addr := cfg.Addr
	if addr == "" {
		u, err := url.Parse(cfg.URL)
		if err != nil {
			return nil, fmt.Errorf("loadgen: %w", err)
		}
		addr = u.Host
	}
	if err := CheckTarget(addr, cfg.NetNS); err != nil {
		return nil, err
	}
	if cfg.MaxErrors <= 0 {
		cfg.MaxErrors = 10
	}
	b := cfg.Bounds.withDefaults()
	r := &HTTPRun{cfg: cfg, max: b.MaxRequests, t0: time.Now(), byLabel: map[string]int64{},
		errs: errorLog{max: cfg.MaxErrors, distinct: cfg.DistinctErrors}}
	r.ctx, r.stop = context.WithTimeout(context.Background(), b.MaxDuration)
	r.lastOK.Store(r.t0.UnixNano())
	for i := range cfg.Clients {
		r.wg.Add(1)
		go r.client(i)
	}
	return r, nil
}

func defaultClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 1,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// clientState is one client's own bookkeeping.
type clientState struct {
	i        int
	label    string
	c        *http.Client
	lat      []time.Duration
	last     time.Time
	current  string
	left     map[string]bool
	answered int64
}

func (r *HTTPRun) client(i int) {
	defer r.wg.Done()
	cs := &clientState{i: i, left: map[string]bool{}, last: time.Now(), lat: make([]time.Duration, 0, 1<<12)}
	if r.cfg.Label != nil {
		cs.label = r.cfg.Label(i)
	}
	cs.c = defaultClient()
	if r.cfg.NewClient != nil {
		cs.c = r.cfg.NewClient(i)
	}
	defer cs.c.CloseIdleConnections()
	defer r.merge(cs)
	for n := int64(0); r.ctx.Err() == nil; n++ {
		if n >= r.max {
			r.bounded.Store(true)
			return
		}
		if !r.once(cs) {
			return
		}
	}
	if r.ctx.Err() == context.DeadlineExceeded {
		r.bounded.Store(true)
	}
}

// once sends one request and counts it; false when the run was stopped
// with AbortOnStop.
func (r *HTTPRun) once(cs *clientState) bool {
	reqCtx := context.Background()
	if r.cfg.AbortOnStop {
		reqCtx = r.ctx
	}
	req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, r.cfg.URL, nil)
	if r.cfg.Host != "" {
		req.Host = r.cfg.Host
	}
	t0 := time.Now()
	resp, err := cs.c.Do(req)
	if err != nil {
		if r.aborted() {
			return false
		}
		r.fail(cs, &r.transport, err.Error())
		return true
	}
	body, err := r.readBody(resp)
	if r.aborted() {
		return false
	}
	r.answered.Add(1)
	cs.answered++
	switch {
	case err != nil:
		r.fail(cs, &r.transport, "read body: "+err.Error())
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		r.fail(cs, &r.non2xx, fmt.Sprintf("status %d: %.200s", resp.StatusCode, body))
	default:
		if r.cfg.Check != nil {
			if err := r.cfg.Check(cs.i, resp); err != nil {
				r.fail(cs, &r.rejected, err.Error())
				return true
			}
		}
		r.succeed(cs, t0, body)
	}
	return true
}

func (r *HTTPRun) aborted() bool { return r.cfg.AbortOnStop && r.ctx.Err() != nil }

func (r *HTTPRun) readBody(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if r.cfg.Identity != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		return io.ReadAll(resp.Body)
	}
	_, err := io.Copy(io.Discard, resp.Body)
	return nil, err
}

func (r *HTTPRun) fail(cs *clientState, counter *atomic.Int64, text string) {
	counter.Add(1)
	if cs.label != "" {
		text = cs.label + ": " + text
	}
	r.errs.note(text)
	if r.cfg.FailurePause > 0 {
		time.Sleep(r.cfg.FailurePause)
	}
}

func (r *HTTPRun) succeed(cs *clientState, t0 time.Time, body []byte) {
	now := time.Now()
	cs.lat = append(cs.lat, now.Sub(t0))
	r.ok.Add(1)
	storeMax(&r.maxGap, now.UnixNano()-r.lastOK.Swap(now.UnixNano()))
	storeMax(&r.maxClientGap, int64(now.Sub(cs.last)))
	cs.last = now
	if r.cfg.Identity == nil {
		return
	}
	id := r.cfg.Identity(body)
	if id == cs.current {
		return
	}
	if cs.left[id] {
		r.regressions.Add(1)
		r.errs.note("client went back to instance " + id)
	}
	if cs.current != "" {
		cs.left[cs.current] = true
	}
	cs.current = id
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

func (r *HTTPRun) merge(cs *clientState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lat = append(r.lat, cs.lat...)
	if r.cfg.Label != nil {
		r.byLabel[cs.label] += cs.answered
	}
}

// Snapshot is the answered and failed counts so far, without stopping.
func (r *HTTPRun) Snapshot() (answered, failed int64) {
	return r.answered.Load(), r.transport.Load() + r.non2xx.Load() + r.rejected.Load()
}

// Errors is a copy of the error texts kept so far.
func (r *HTTPRun) Errors() []string { return r.errs.copy() }

// Stop ends the run and returns its statistics; later calls return the
// same counts.
func (r *HTTPRun) Stop() HTTPStats {
	r.stop()
	r.wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := HTTPStats{
		Answered: r.answered.Load(), OK: r.ok.Load(), Transport: r.transport.Load(), Non2xx: r.non2xx.Load(),
		Rejected: r.rejected.Load(), Regressions: r.regressions.Load(), ByLabel: maps.Clone(r.byLabel),
		LongestGap: time.Duration(r.maxGap.Load()), LongestClientGap: time.Duration(r.maxClientGap.Load()),
		Elapsed: time.Since(r.t0), Errors: r.errs.copy(), Bounded: r.bounded.Load(),
	}
	slices.Sort(r.lat)
	s.P50, s.P99 = percentile(r.lat, 50), percentile(r.lat, 99)
	if n := len(r.lat); n > 0 {
		s.Max = r.lat[n-1]
	}
	return s
}
