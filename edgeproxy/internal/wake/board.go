package wake

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gordon-deploy/docker-gordon/edgeproxy/edgestate"
)

// MaxWait bounds one long poll of GET /wakes.
const MaxWait = 60 * time.Second

// Board holds the wake requests of sleeping services (SPEC R81). A
// service is asked for once per wake: Ask returns true only for the first
// ask since the service was last routed (Routed) or since its wake's bound
// passed (the watcher did not wake it: the next request asks again).
type Board struct {
	mu      sync.Mutex
	pending map[key]edgestate.WakeRequest // not yet taken by a poll
	asked   map[key]asked                 // asked and not yet routed
	notify  chan struct{}                 // closed when pending grows

	wakes    *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// Held counts the requests and connections held for a wake.
	Held prometheus.Gauge
}

type key struct{ app, service string }

type asked struct {
	at, until time.Time
}

// NewBoard returns an empty board whose metrics are registered on reg:
// gordon_edge_wakes_total{app,service}, gordon_edge_wake_duration_seconds
// {app,service} (from the first ask to the table that routes the service)
// and gordon_edge_held_for_wake.
func NewBoard(reg prometheus.Registerer) *Board {
	b := &Board{
		pending: map[key]edgestate.WakeRequest{},
		asked:   map[key]asked{},
		notify:  make(chan struct{}),
		wakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gordon_edge", Name: "wakes_total",
			Help: "Wakes of sleeping services the edge asked for (concurrent first requests ask once).",
		}, []string{"app", "service"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "gordon_edge", Name: "wake_duration_seconds",
			Help:    "Time from the first request that asked for a wake to the route table that routes the woken service.",
			Buckets: []float64{.05, .1, .25, .5, 1, 2, 5, 10, 30, 60},
		}, []string{"app", "service"}),
		Held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "gordon_edge", Name: "held_for_wake",
			Help: "HTTP requests and TCP connections held while their service wakes.",
		}),
	}
	if reg != nil {
		reg.MustRegister(b.wakes, b.duration, b.Held)
	}
	return b
}

// Ask records that a request or a connection for app's service arrived
// while it sleeps; bound is how long the edge holds it for the wake. It
// reports whether this call asked (false: a wake is already asked for).
func (b *Board) Ask(app, service string, bound time.Duration) bool {
	now := time.Now()
	k := key{app, service}
	b.mu.Lock()
	defer b.mu.Unlock()
	if a, ok := b.asked[k]; ok && now.Before(a.until) {
		return false
	}
	b.asked[k] = asked{at: now, until: now.Add(bound)}
	b.pending[k] = edgestate.WakeRequest{App: app, Service: service, At: now.UTC()}
	b.wakes.WithLabelValues(app, service).Inc()
	close(b.notify)
	b.notify = make(chan struct{})
	return true
}

// Routed is called with each applied table's routed services (those with
// backends): a service asked for is woken, its wake duration observed and
// its ask forgotten, so its next sleep asks again.
func (b *Board) Routed(routed func(app, service string) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.asked) == 0 {
		return
	}
	for k, a := range b.asked {
		if routed(k.app, k.service) {
			b.duration.WithLabelValues(k.app, k.service).Observe(time.Since(a.at).Seconds())
			delete(b.asked, k)
			delete(b.pending, k)
		}
	}
}

// Take returns the pending wake requests (sorted by app, service) and
// clears them, waiting up to wait for one when none is pending; empty when
// the wait passed or done closed.
func (b *Board) Take(done <-chan struct{}, wait time.Duration) []edgestate.WakeRequest {
	t := time.NewTimer(min(wait, MaxWait))
	defer t.Stop()
	for {
		b.mu.Lock()
		if len(b.pending) > 0 {
			out := make([]edgestate.WakeRequest, 0, len(b.pending))
			for k, w := range b.pending {
				out = append(out, w)
				delete(b.pending, k)
			}
			b.mu.Unlock()
			sort.Slice(out, func(i, j int) bool {
				if out[i].App != out[j].App {
					return out[i].App < out[j].App
				}
				return out[i].Service < out[j].Service
			})
			return out
		}
		ch := b.notify
		b.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return []edgestate.WakeRequest{}
		case <-done:
			return []edgestate.WakeRequest{}
		}
	}
}

// ServeWakes is GET /wakes?wait=SECONDS (default 25, at most MaxWait):
// the pending wake requests as a JSON array, answered as soon as one is
// pending, or [] when the wait passes.
func (b *Board) ServeWakes(w http.ResponseWriter, r *http.Request) {
	wait := 25 * time.Second
	if v := r.URL.Query().Get("wait"); v != "" {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			http.Error(w, "wait: want seconds, e.g. 25", http.StatusBadRequest)
			return
		}
		wait = time.Duration(n * float64(time.Second))
	}
	out := b.Take(r.Context().Done(), wait)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
