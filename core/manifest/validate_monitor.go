package manifest

import (
	"time"

	"github.com/gordon-deploy/docker-gordon/core"
)

// Monitor window bounds (SPEC R76).
const (
	minMonitorWindow = 10 * time.Second
	maxMonitorWindow = 30 * time.Minute
)

// monitor validates [services.X.monitor] (SPEC R76): window a duration
// from 10s to 30m, max_error_rate a number from 0 to 1, min_requests at
// least 1; all three are required. The error rate is measured at the
// edge, so the service needs an HTTP interface; a one-shot is never
// switched to. nil when the table is absent or invalid.
func (v *validator) monitor(key string, raw *rawMonitor, svc *core.ServiceSpec) *core.Monitor {
	if raw == nil {
		return nil
	}
	if svc.Run == core.RunOnce {
		v.add(key, `a one-shot service (run = "once") is never switched to, so there is nothing to monitor; remove [monitor]`)
		return nil
	}
	if len(svc.HTTP) == 0 {
		v.add(key, "the monitor measures the error rate of HTTP requests at the edge, and this service declares no [[http]] interface; add one or remove [monitor]")
		return nil
	}
	ok := true
	if raw.Window == nil {
		v.add(key+".window", `missing: want how long to watch the new generation after the switch, from 10s to 30m, such as "60s"`)
		ok = false
	}
	w := v.duration(key+".window", raw.Window, minMonitorWindow, maxMonitorWindow)
	if raw.Window != nil && w == 0 {
		ok = false
	}
	switch {
	case raw.MaxErrorRate == nil:
		v.add(key+".max_error_rate", "missing: want the highest tolerated share of 5xx answers, from 0 to 1, such as 0.05")
		ok = false
	case *raw.MaxErrorRate < 0 || *raw.MaxErrorRate > 1:
		v.addf(key+".max_error_rate", "%g is out of range: want a share from 0 to 1, such as 0.05 for 5 %%", *raw.MaxErrorRate)
		ok = false
	}
	switch {
	case raw.MinRequests == nil:
		v.add(key+".min_requests", "missing: want how many requests the window must see before a rate counts, at least 1, such as 20")
		ok = false
	case *raw.MinRequests < 1:
		v.addf(key+".min_requests", "%d is out of range: want at least 1 request", *raw.MinRequests)
		ok = false
	}
	if !ok {
		return nil
	}
	return &core.Monitor{Window: w, MaxErrorRate: *raw.MaxErrorRate, MinRequests: *raw.MinRequests}
}
