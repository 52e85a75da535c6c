package dataplane

import (
	"time"
)

func (r *HTTPRoute) healthy(i int, now int64) int {
	n := len(r.Backends)
	for k := 0; k < n; k++ {
		j := (i + k) % n
		if !r.Backends[j].Health.Ejected(now) {
			return j
		}
	}
	return i
}

func (r *HTTPRoute) Other(i int, now int64) int {
	n := len(r.Backends)
	for k := 1; k < n; k++ {
		j := (i + k) % n
		if !r.Backends[j].Health.Ejected(now) {
			return j
		}
	}
	return -1
}

func (r *HTTPRoute) eject(reg *Registry, i int, reason string) bool {
	if reason == "" {
		return false
	}
	now := time.Now().UnixNano()
	if r.Other(i, now) < 0 {
		return false // never the last instance
	}
	return reg.Eject(r.Backends[i], now, reason, r.App, r.Service)
}

func (reg *Registry) Eject(b *Backend, now int64, reason, app, service string) bool {
	if b.Health.Ejected(now) {
		return false
	}
	until := b.Health.Eject(now, reason)
	reg.logger.Info("backend ejected", "backend", b.Addr, "app", app, "service", service,
		"reason", reason, "until", time.Unix(0, until).UTC().Format(time.RFC3339))
	if reg.Metrics != nil {
		reg.Metrics.ejected(b.Addr, reason)
	}
	return true
}
