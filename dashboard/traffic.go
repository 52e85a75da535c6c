package dashboard

import (
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/gordon-deploy/docker-gordon/core/engine"
)

// RateWindow is how far back RPS, ErrorRate and the quantiles of a Rate
// reach; Series reaches back Window.
const RateWindow = time.Minute

// sample is the edge's counters at one moment.
type sample struct {
	at time.Time
	c  map[backendKey]*counts
}

// generation is what the Feed learnt of a backend address from a status:
// the app, service and revision its instance runs, and when it was seen.
type generation struct {
	app, service, revision string
	seen                   time.Time
}

// traffic keeps the edge's samples of the last Window and which
// generation each backend address served, so the figures of a generation
// that was switched away from stay named after it.
type traffic struct {
	samples []sample
	gens    map[string]generation
}

// add keeps c as the sample at at, and forgets what is older than Window
// (keeping one sample before it as the base of the oldest delta).
func (t *traffic) add(at time.Time, c map[backendKey]*counts) {
	t.samples = append(t.samples, sample{at, c})
	cut := 0
	for cut+1 < len(t.samples) && at.Sub(t.samples[cut+1].at) > Window {
		cut++
	}
	t.samples = t.samples[cut:]
	for addr, g := range t.gens {
		if at.Sub(g.seen) > Window {
			delete(t.gens, addr)
		}
	}
}

// learn records the backend addresses of every instance in sts.
func (t *traffic) learn(at time.Time, sts []engine.AppStatus) {
	if t.gens == nil {
		t.gens = map[string]generation{}
	}
	for _, st := range sts {
		for _, s := range st.Services {
			g := generation{st.App, s.Service, s.Revision, at}
			for _, addr := range instanceAddrs(s) {
				t.gens[addr] = g
			}
		}
	}
}

// instanceAddrs are the "IP:port" the edge dials s's instances at (the
// primary's and every replica's), as the route graph builds them.
func instanceAddrs(s engine.ServiceStatus) []string {
	var out []string
	add := func(ip string, binds map[int]int) {
		if ip == "" {
			ip = "127.0.0.1"
		}
		for _, hp := range binds {
			out = append(out, net.JoinHostPort(ip, strconv.Itoa(hp)))
		}
	}
	add(s.IP, s.BackendBinds)
	for _, in := range s.Instances {
		add(in.IP, in.BackendBinds)
	}
	return out
}

// rateKey groups backends into one service generation.
type rateKey struct{ service, revision string }

// rates are app's figures per service and generation (see Rate), the
// generation a status names serving marked Serving; sorted by service,
// then serving first, then revision.
func (t *traffic) rates(app string, serving map[string]string) []Rate {
	if len(t.samples) < 2 {
		return nil
	}
	last := t.samples[len(t.samples)-1]
	base := t.samples[0]
	for _, s := range t.samples {
		if last.at.Sub(s.at) <= RateWindow {
			break
		}
		base = s
	}
	groups := map[rateKey]*Rate{}
	hist := map[rateKey]map[float64]float64{}
	group := func(k backendKey) (rateKey, *Rate) {
		rk := rateKey{k.service, t.gens[k.backend].revision}
		r := groups[rk]
		if r == nil {
			r = &Rate{Service: k.service, Revision: rk.revision, Serving: rk.revision != "" && serving[k.service] == rk.revision}
			groups[rk] = r
			hist[rk] = map[float64]float64{}
		}
		return rk, r
	}
	dt := last.at.Sub(base.at).Seconds()
	for k, c := range last.c {
		if k.app != app {
			continue
		}
		rk, r := group(k)
		r.Backends = append(r.Backends, k.backend)
		b := base.c[k]
		req, errs := delta(c.requests, b, func(b *counts) float64 { return b.requests }), delta(c.errors, b, func(b *counts) float64 { return b.errors })
		r.Requests += int64(req)
		r.ErrorRate += errs // the error count until divided below
		if dt > 0 {
			r.RPS += req / dt
		}
		for le, n := range c.buckets {
			hist[rk][le] += delta(n, b, func(b *counts) float64 { return b.buckets[le] })
		}
	}
	out := make([]Rate, 0, len(groups))
	for rk, r := range groups {
		if r.Requests > 0 {
			r.ErrorRate /= float64(r.Requests)
		} else {
			r.ErrorRate = 0
		}
		r.P50, r.P99 = quantile(0.5, hist[rk]), quantile(0.99, hist[rk])
		r.Series = t.series(app, rk)
		sort.Strings(r.Backends)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Service != b.Service {
			return a.Service < b.Service
		}
		if a.Serving != b.Serving {
			return a.Serving
		}
		return a.Revision > b.Revision
	})
	return out
}

// series is the requests per second of one generation between
// consecutive samples, oldest first.
func (t *traffic) series(app string, rk rateKey) []float64 {
	out := make([]float64, 0, len(t.samples)-1)
	for i := 1; i < len(t.samples); i++ {
		prev, cur := t.samples[i-1], t.samples[i]
		dt := cur.at.Sub(prev.at).Seconds()
		sum := 0.0
		for k, c := range cur.c {
			if k.app != app || k.service != rk.service || t.gens[k.backend].revision != rk.revision {
				continue
			}
			sum += delta(c.requests, prev.c[k], func(b *counts) float64 { return b.requests })
		}
		if dt > 0 {
			out = append(out, sum/dt)
		}
	}
	return out
}

// delta is cur less the base's value; a counter that went down (the edge
// restarted) counts from zero, and one without a base counts whole.
func delta(cur float64, base *counts, get func(*counts) float64) float64 {
	if base == nil {
		return cur
	}
	d := cur - get(base)
	if d < 0 {
		return cur
	}
	return d
}
